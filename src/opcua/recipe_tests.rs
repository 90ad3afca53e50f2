//! `RecipeBook` over a real `RecipeDesk` and worker, whose model thread is
//! a test double that takes every recipe (or refuses recipe "bad").

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::config::{Config, Recipe};
use crate::model_swap::SwapRefused;
use crate::recipe::RecipeSwap;

struct Takes;

impl RecipeSwap for Takes {
    type Prepared = ();

    fn prepare(&mut self, _: &Config, _: &Config, recipe: &Arc<Recipe>) -> Result<(), SwapRefused> {
        if &*recipe.name == "bad" {
            return Err(SwapRefused {
                step: "acceptance",
                detail: "accuracy below the floor".into(),
            });
        }
        Ok(())
    }

    fn hand_over(&mut self, _: &Config, _: &Arc<Recipe>, _: Option<()>) -> Result<(), SwapRefused> {
        Ok(())
    }
}

/// Recipes a (id 1, start), b (id 2) and bad (id 3) on other model files.
fn book() -> (RecipeBook, Arc<RecipeDesk>) {
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
    let text = format!(
        "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"{models}/seg.onnx\"\n\
         [models.classifier]\npath = \"{models}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n\
         [recipes.a]\nid = 1\n[recipes.b]\nid = 2\nclassifier = \"{models}/seg.onnx\"\n\
         [recipes.bad]\nid = 3\nclassifier = \"{models}/seg.onnx\"\n"
    );
    let base = crate::config::parse(&text, std::path::Path::new("/tmp/s.toml")).unwrap();
    let desk = RecipeDesk::new(base.recipes.clone().unwrap());
    crate::recipe::start_worker(&desk, base, Takes, Box::new(|_| {})).unwrap();
    (RecipeBook::new(Some(Arc::clone(&desk))), desk)
}

/// `finished` polled as the pump does, until one comes (at most 5 s).
fn next_finished(book: &RecipeBook) -> Finished {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(done) = book.finished().pop() {
            return done;
        }
        assert!(Instant::now() < until, "no preparation ended");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_recipe_prepared_is_announced_and_a_job_with_it_switches_to_it() {
    let (book, desk) = book();
    assert_eq!(
        book.for_job("b"),
        Err(RecipeRefused::NotPrepared("b".into())),
        "not prepared: no switch that would hold the server's thread"
    );
    let (name, _completed) = book.prepare(1, "2").unwrap();
    assert_eq!(name, "b");
    let done = next_finished(&book);
    assert_eq!((done.camera, done.asked.as_str()), (1, "2"));
    assert_eq!(done.outcome, Ok("b".to_string()));
    assert_eq!(book.prepared_names(), "b");
    assert_eq!(book.active(), "a", "preparing does not switch");
    let listed: Vec<(String, bool)> = book
        .list()
        .into_iter()
        .map(|l| (l.name, l.prepared))
        .collect();
    assert_eq!(
        listed,
        [
            ("a".into(), true),
            ("b".into(), true),
            ("bad".into(), false)
        ]
    );
    assert_eq!(book.for_job("b"), Ok("b".to_string()));
    assert_eq!(book.active(), "b");
    assert_eq!(&*desk.active().name, "b");
    assert_eq!(
        book.for_job(""),
        Ok("b".to_string()),
        "empty: the active one"
    );
    assert_eq!(book.for_job("0"), Ok("b".to_string()));
    // The active one prepared again is ready at once, and announced too.
    assert_eq!(book.prepare(0, "b").unwrap(), ("b".to_string(), true));
    assert_eq!(next_finished(&book).outcome, Ok("b".to_string()));
}

#[test]
fn refusals_carry_the_modbus_maps_codes() {
    let (book, _desk) = book();
    assert_eq!(book.prepare(0, "nine").unwrap_err().code(), 6);
    assert_eq!(book.for_job("9").unwrap_err().code(), 6);
    book.prepare(0, "bad").unwrap();
    let refused = next_finished(&book).outcome.unwrap_err();
    assert_eq!(refused.code(), 7, "{refused}");
    assert!(refused.to_string().contains("accuracy below the floor"));
    assert_eq!(book.for_job("bad").unwrap_err().code(), 9);
    assert_eq!(
        book.unprepare("b"),
        Ok("b".to_string()),
        "not prepared: nothing to do"
    );
    book.prepare(0, "b").unwrap();
    next_finished(&book);
    assert_eq!(book.unprepare("b"), Ok("b".to_string()));
    assert_eq!(book.prepared_names(), "");
}

#[test]
fn without_recipes_default_is_the_one_recipe() {
    let book = RecipeBook::new(None);
    assert_eq!(book.active(), DEFAULT_RECIPE);
    assert_eq!(book.for_job("0"), Ok(DEFAULT_RECIPE.to_string()));
    assert_eq!(book.for_job("default"), Ok(DEFAULT_RECIPE.to_string()));
    assert_eq!(book.for_job("cup").unwrap_err().code(), 6);
    assert_eq!(
        book.prepare(2, "").unwrap(),
        (DEFAULT_RECIPE.to_string(), true)
    );
    assert_eq!(book.finished()[0].camera, 2);
    assert_eq!(book.list()[0].name, DEFAULT_RECIPE);
}
