use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::*;
use crate::decision::{Decision, Reason, Verdict};
use crate::frame::Part;
use crate::plc::map::*;

fn config(buffer: usize, handshake: bool) -> ModbusConfig {
    ModbusConfig {
        listen: "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
        buffer,
        handshake,
        allow: Vec::new(),
        max_connections: 4,
        idle_timeout: Duration::from_secs(60),
    }
}

fn station(buffer: usize, handshake: bool, ready: bool) -> Station {
    let desk = Arc::new(TriggerDesk::new(0, Duration::ZERO));
    desk.set_ready(ready);
    Station::new(1, desk, &config(buffer, handshake), None)
}

fn verdict(number: u64, id: u64, reason: Reason) -> LineVerdict {
    let now = Instant::now();
    LineVerdict {
        seq: 1000 + number,
        part: Part {
            number,
            id,
            trigger: None,
            framed: true,
        },
        captured_at: SystemTime::now(),
        captured_instant: now,
        decision: Decision {
            verdict: reason.verdict(),
            reason,
            defect_prob: Some(0.25),
            seal_area: None,
        },
        latency_ms: 12.34,
        deadline: None,
        models: None,
        camera: None,
        cavities: None,
    }
}

fn valid(s: &Station) -> bool {
    s.discrete_inputs()[DI_RESULTS_VALID as usize]
}

fn shown_id(s: &Station) -> u32 {
    let ir = s.input_registers();
    from_words(
        ir[IR_RESULT_PART_ID as usize],
        ir[IR_RESULT_PART_ID as usize + 1],
    )
}

fn buffered(s: &Station) -> u16 {
    s.input_registers()[IR_RESULTS_BUFFERED as usize]
}

fn error_code(s: &Station) -> u16 {
    s.input_registers()[IR_ERROR_CODE as usize]
}

fn ack(s: &Station) {
    s.write_coil(COIL_RESULTS_ACK, true);
    s.write_coil(COIL_RESULTS_ACK, false);
}

#[test]
fn results_are_presented_one_at_a_time_in_order_through_the_four_way_handshake() {
    let s = station(8, true, true);
    assert!(!valid(&s));
    for n in 0..3 {
        s.send(&verdict(n, 4711 + n, Reason::Ok));
    }
    assert!(valid(&s));
    assert_eq!((shown_id(&s), buffered(&s)), (4711, 3));
    s.write_coil(COIL_RESULTS_ACK, true);
    assert!(!valid(&s), "ResultsAck's rising edge lowers ResultsValid");
    assert_eq!(buffered(&s), 2);
    s.send(&verdict(3, 4714, Reason::Ok));
    assert!(!valid(&s), "nothing is presented while ResultsAck is high");
    s.write_coil(COIL_RESULTS_ACK, false);
    assert!(valid(&s));
    assert_eq!(shown_id(&s), 4712);
    ack(&s);
    assert_eq!(shown_id(&s), 4713);
    ack(&s);
    assert_eq!((shown_id(&s), buffered(&s)), (4714, 1));
    ack(&s);
    assert!(!valid(&s));
    assert_eq!(buffered(&s), 0);
    assert_eq!(error_code(&s), 0);
}

#[test]
fn a_trigger_is_acknowledged_until_trigger_goes_low_and_counted() {
    let s = station(8, true, true);
    s.write_coil(COIL_TRIGGER_ENABLE, true);
    assert!(s.discrete_inputs()[DI_TRIGGER_READY as usize]);
    s.write_registers(HR_PART_ID, &words(0x0001_2345));
    let outcome = s.write_coil(COIL_TRIGGER, true);
    assert_eq!(
        outcome,
        Some(TriggerOutcome::Accepted {
            number: 0,
            id: 0x0001_2345
        })
    );
    assert!(s.discrete_inputs()[DI_TRIGGER_ACK as usize]);
    assert_eq!(s.input_registers()[IR_ACQUISITION_COUNT as usize], 1);
    // Trigger held high: no second edge, no second part.
    assert_eq!(s.write_coil(COIL_TRIGGER, true), None);
    assert_eq!(s.desk().accepted(), 1);
    s.write_coil(COIL_TRIGGER, false);
    assert!(!s.discrete_inputs()[DI_TRIGGER_ACK as usize]);
    s.write_registers(HR_PART_ID + 1, &[7]);
    assert_eq!(
        s.write_coil(COIL_TRIGGER, true),
        Some(TriggerOutcome::Accepted {
            number: 1,
            id: 0x0001_0007
        })
    );
    assert_eq!(s.input_registers()[IR_ACQUISITION_COUNT as usize], 2);
    assert_eq!(error_code(&s), 0);
}

#[test]
fn trigger_enable_off_refuses_the_trigger_with_an_error_until_clear_error() {
    let s = station(8, true, true);
    assert!(
        !s.discrete_inputs()[DI_TRIGGER_READY as usize],
        "TriggerReady needs TriggerEnable"
    );
    assert_eq!(
        s.write_coil(COIL_TRIGGER, true),
        Some(TriggerOutcome::Disabled)
    );
    let di = s.discrete_inputs();
    assert!(!di[DI_TRIGGER_ACK as usize]);
    assert!(di[DI_ERROR as usize]);
    assert_eq!(error_code(&s), ErrorCode::TriggerDisabled.code());
    assert_eq!(s.desk().accepted(), 0);
    s.write_coil(COIL_CLEAR_ERROR, true);
    assert!(!s.discrete_inputs()[DI_ERROR as usize]);
    assert_eq!(error_code(&s), 0);
}

#[test]
fn a_trigger_the_desk_refuses_leaves_trigger_ack_low_and_says_why() {
    let s = station(8, true, false);
    s.write_coil(COIL_TRIGGER_ENABLE, true);
    let di = s.discrete_inputs();
    assert!(!di[DI_ONLINE as usize] && !di[DI_TRIGGER_READY as usize]);
    assert_eq!(
        s.write_coil(COIL_TRIGGER, true),
        Some(TriggerOutcome::Refused(Refused::Offline))
    );
    assert!(!s.discrete_inputs()[DI_TRIGGER_ACK as usize]);
    assert_eq!(error_code(&s), ErrorCode::TriggerOffline.code());
    assert_eq!(s.input_registers()[IR_ACQUISITION_COUNT as usize], 0);
}

#[test]
fn a_full_buffer_raises_error_and_counts_the_results_it_does_not_present() {
    let s = station(2, true, true);
    for n in 0..5 {
        s.send(&verdict(n, 100 + n, Reason::Defect));
    }
    assert_eq!(buffered(&s), 2);
    assert_eq!(error_code(&s), ErrorCode::BufferFull.code());
    assert!(s.discrete_inputs()[DI_ERROR as usize]);
    assert_eq!(s.not_presented(), 3);
    // A refused trigger does not hide it.
    s.write_coil(COIL_TRIGGER, true);
    assert_eq!(error_code(&s), ErrorCode::BufferFull.code());
    assert_eq!(shown_id(&s), 100);
    ack(&s);
    assert_eq!(shown_id(&s), 101);
    ack(&s);
    assert!(!valid(&s), "parts 102..=104 are never presented");
    s.send(&verdict(5, 105, Reason::Ok));
    assert_eq!(shown_id(&s), 105);
    assert!(
        s.discrete_inputs()[DI_ERROR as usize],
        "the error stays until ClearError"
    );
    s.write_coil(COIL_CLEAR_ERROR, true);
    assert_eq!(error_code(&s), 0);
    s.write_coil(COIL_CLEAR_ERROR, false);
    assert_eq!(s.not_presented(), 3);
}

#[test]
fn without_the_handshake_each_new_result_is_presented_at_once() {
    let s = station(2, false, true);
    for n in 0..5 {
        s.send(&verdict(n, 200 + n, Reason::Ok));
        assert!(valid(&s));
        assert_eq!(shown_id(&s), 200 + n as u32);
        assert_eq!(buffered(&s), 1);
    }
    assert_eq!((s.not_presented(), error_code(&s)), (0, 0));
    s.write_coil(COIL_RESULTS_ACK, true);
    assert!(!valid(&s), "ResultsAck still lowers ResultsValid");
    s.send(&verdict(5, 205, Reason::Ok));
    assert!(
        valid(&s),
        "a new result raises it again, ResultsAck high or not"
    );
    assert_eq!(shown_id(&s), 205);
}

#[test]
fn the_presented_result_fills_the_map() {
    let s = station(8, true, true);
    let mut late = verdict(0, 0xDEAD_BEEF, Reason::Ok).into_late_fail();
    late.latency_ms = 1e9;
    s.send(&late);
    let di = s.discrete_inputs();
    assert!(di[DI_RESULTS_VALID as usize] && di[DI_LATE as usize] && !di[DI_PASS as usize]);
    let ir = s.input_registers();
    assert_eq!(shown_id(&s), 0xDEAD_BEEF);
    assert_eq!(ir[IR_REASON_CODE as usize], 6);
    assert_eq!(ir[IR_TRIGGER_TO_RESULT_MS as usize], u16::MAX, "saturates");
    assert_eq!(
        from_words(ir[IR_RESULT_SEQ as usize], ir[IR_RESULT_SEQ as usize + 1]),
        1000
    );
    ack(&s);

    s.send(&verdict(1, 7, Reason::Ok));
    let (di, ir) = (s.discrete_inputs(), s.input_registers());
    assert!(di[DI_PASS as usize] && !di[DI_LATE as usize]);
    assert_eq!(ir[IR_REASON_CODE as usize], 0);
    assert_eq!(ir[IR_DEFECT_PROB as usize], 2500);
    assert_eq!(ir[IR_TRIGGER_TO_RESULT_MS as usize], 123);
    ack(&s);

    let mut missed = verdict(2, 8, Reason::NoFrame);
    missed.part.framed = false;
    missed.decision = Decision::failed(Reason::NoFrame);
    s.send(&missed);
    let ir = s.input_registers();
    assert_eq!(ir[IR_REASON_CODE as usize], 7);
    assert_eq!(ir[IR_DEFECT_PROB as usize], DEFECT_PROB_NONE);
    assert_eq!(
        from_words(ir[IR_RESULT_SEQ as usize], ir[IR_RESULT_SEQ as usize + 1]),
        RESULT_SEQ_NO_FRAME
    );
    assert_eq!(missed.decision.verdict, Verdict::Fail);
}

#[test]
fn the_heartbeat_counts_tenths_of_a_second() {
    let s = station(8, true, true);
    let first = s.input_registers()[IR_HEARTBEAT as usize];
    std::thread::sleep(Duration::from_millis(250));
    let later = s.input_registers()[IR_HEARTBEAT as usize];
    assert!(
        (2..=4).contains(&later.wrapping_sub(first)),
        "{first} -> {later}"
    );
}

#[test]
fn a_part_triggered_over_http_never_fills_the_plcs_result_buffer() {
    use crate::frame::{TriggerTime, TriggeredBy};
    let s = station(8, true, true);
    let by = |number: u64, by: TriggeredBy| {
        let mut v = verdict(number, 100 + number, Reason::Ok);
        v.part.trigger = Some(TriggerTime::now(by));
        v
    };
    s.send(&by(0, TriggeredBy::Http));
    assert!(!valid(&s), "an HTTP part is not the PLC's");
    assert_eq!(buffered(&s), 0);
    s.send(&by(1, TriggeredBy::Plc));
    s.send(&by(2, TriggeredBy::Camera));
    assert!(valid(&s));
    assert_eq!((shown_id(&s), buffered(&s)), (101, 2));
}

/// A recipe switch's hand-over as a test double: done at once, or refused
/// at the acceptance gate.
struct HandOver {
    refuse: bool,
}

impl crate::recipe::RecipeSwap for HandOver {
    type Prepared = ();

    fn prepare(
        &mut self,
        _base: &crate::config::Config,
        _judged: &crate::config::Config,
        _recipe: &Arc<crate::config::Recipe>,
    ) -> Result<(), crate::model_swap::SwapRefused> {
        Ok(())
    }

    fn hand_over(
        &mut self,
        _judged: &crate::config::Config,
        _recipe: &Arc<crate::config::Recipe>,
        _prepared: Option<()>,
    ) -> Result<(), crate::model_swap::SwapRefused> {
        if self.refuse {
            return Err(crate::model_swap::SwapRefused {
                step: "acceptance",
                detail: "accuracy below the floor".into(),
            });
        }
        Ok(())
    }
}

/// A station with recipes 1 and 2 (1 active) and a worker whose hand-over
/// succeeds or is refused.
fn station_with_recipes(refuse: bool) -> Station {
    let models = concat!(env!("CARGO_MANIFEST_DIR"), "/models");
    let text = format!(
        "[source]\nkind = \"test\"\n[models.segmentation]\npath = \"{models}/seg.onnx\"\n\
         [models.classifier]\npath = \"{models}/cls.onnx\"\n[output]\nresults = \"r.jsonl\"\n\
         [recipes.a]\nid = 1\n[recipes.b]\nid = 2\ndefect_threshold = 0.2\n"
    );
    let base = crate::config::parse(&text, std::path::Path::new("/tmp/sealcheck.toml")).unwrap();
    let recipes = RecipeDesk::new(base.recipes.clone().unwrap());
    crate::recipe::start_worker(&recipes, base, HandOver { refuse }, Box::new(|_| {})).unwrap();
    let desk = Arc::new(TriggerDesk::new(0, Duration::ZERO));
    Station::new(1, desk, &config(8, true), Some(recipes))
}

/// Polls the discrete inputs until `bit` is high (at most 5 s).
fn wait_for_bit(station: &Station, bit: u16) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if station.discrete_inputs()[usize::from(bit)] {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn a_recipe_request_switches_and_done_stays_high_until_the_request_goes_low() {
    let station = station_with_recipes(false);
    assert_eq!(station.input_registers()[IR_ACTIVE_RECIPE as usize], 1);
    station.write_registers(HR_RECIPE_ID, &[2]);
    station.write_coil(COIL_RECIPE_REQUEST, true);
    assert!(wait_for_bit(&station, DI_RECIPE_DONE));
    let di = station.discrete_inputs();
    assert!(
        !di[DI_RECIPE_FAILED as usize] && !di[DI_RECIPE_BUSY as usize] && !di[DI_ERROR as usize]
    );
    assert_eq!(station.input_registers()[IR_ACTIVE_RECIPE as usize], 2);
    station.write_coil(COIL_RECIPE_REQUEST, false);
    assert!(!station.discrete_inputs()[DI_RECIPE_DONE as usize]);
    // An unknown id: refused at once, ErrorCode 6, the recipe stays.
    station.write_registers(HR_RECIPE_ID, &[9]);
    station.write_coil(COIL_RECIPE_REQUEST, true);
    let di = station.discrete_inputs();
    assert!(di[DI_RECIPE_FAILED as usize] && di[DI_ERROR as usize] && !di[DI_RECIPE_DONE as usize]);
    let ir = station.input_registers();
    assert_eq!(
        (ir[IR_ERROR_CODE as usize], ir[IR_ACTIVE_RECIPE as usize]),
        (6, 2)
    );
    station.write_coil(COIL_RECIPE_REQUEST, false);
    assert!(!station.discrete_inputs()[DI_RECIPE_FAILED as usize]);
}

#[test]
fn a_recipe_whose_models_are_refused_fails_with_error_code_7_and_the_active_one_stays() {
    let station = station_with_recipes(true);
    station.write_registers(HR_RECIPE_ID, &[2]);
    station.write_coil(COIL_RECIPE_REQUEST, true);
    assert!(wait_for_bit(&station, DI_RECIPE_FAILED));
    let ir = station.input_registers();
    assert_eq!(
        (ir[IR_ERROR_CODE as usize], ir[IR_ACTIVE_RECIPE as usize]),
        (7, 1)
    );
    // Without recipes a request is refused as unknown.
    let plain = station_without_recipes();
    plain.write_registers(HR_RECIPE_ID, &[1]);
    plain.write_coil(COIL_RECIPE_REQUEST, true);
    assert!(plain.discrete_inputs()[DI_RECIPE_FAILED as usize]);
    assert_eq!(plain.input_registers()[IR_ERROR_CODE as usize], 6);
    assert_eq!(plain.input_registers()[IR_ACTIVE_RECIPE as usize], 0);
}

fn station_without_recipes() -> Station {
    station(8, true, true)
}
