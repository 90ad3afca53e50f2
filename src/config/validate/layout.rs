//! `[source.layout]` or `[cameras.NAME.layout]`: the cavities of one machine
//! cycle, as a grid (`rows`, `cols`, `first`, `pitch`, `size`) or a list
//! (`cavities`), with `disabled` and `margin`. The rules on the result are
//! `config::layout`'s; each problem names its cavity.

use crate::config::layout::{CavityLayout, CavityRect, MAX_CAVITIES};
use crate::config::raw::Section;

/// Largest coordinate or size a layout takes (a 16K sensor).
const PIXELS: i64 = 16_384;
/// The largest margin: half a cavity of the largest frame.
const MARGIN_MAX: i64 = 4_096;

/// The layout of the camera whose table is `source`: `Some(None)` without
/// a `layout` table, `None` when it has a problem (recorded).
pub(super) fn read_layout(source: &Section) -> Option<Option<CavityLayout>> {
    source.optional("layout", read_table)
}

fn read_table(s: &Section) -> Option<CavityLayout> {
    let grid_keys = ["rows", "cols", "first", "pitch", "size"];
    let is_grid = grid_keys.iter().any(|k| s.has(k));
    let is_list = s.has("cavities");
    let margin = s.int_in("margin", 0..=MARGIN_MAX, Some(0));
    let disabled = s.int_list(
        "disabled",
        None,
        1..=MAX_CAVITIES as i64,
        "cavity numbers, from 1",
    );
    let rects = match (is_grid, is_list) {
        (true, true) => {
            s.problem(
                "cavities",
                "a layout is either a grid (rows, cols, first, pitch, size) or a list of cavities, not both: remove one",
            );
            None
        }
        (false, false) => {
            s.problem(
                "rows",
                "the layout names no cavity: give rows, cols, first = [x, y], pitch = [x, y] and size = [w, h], or cavities = [[x, y, w, h], ...]",
            );
            None
        }
        (true, false) => read_grid(s),
        (false, true) => read_list(s),
    };
    // Both kinds' keys count as read, so that the allowed keys list them all.
    for key in grid_keys.iter().chain(["cavities"].iter()) {
        s.given(key);
    }
    s.finish();
    let (rects, grid) = rects?;
    let disabled: Vec<u16> = disabled?
        .unwrap_or_default()
        .into_iter()
        .map(|n| n as u16)
        .collect();
    match CavityLayout::new(rects, &disabled, margin? as u32, grid) {
        Ok(layout) => Some(layout),
        Err(problems) => {
            for problem in problems {
                s.problem(if is_list { "cavities" } else { "rows" }, problem);
            }
            None
        }
    }
}

type Rects = (Vec<CavityRect>, Option<(u16, u16)>);

fn read_grid(s: &Section) -> Option<Rects> {
    let rows = s.int_in("rows", 1..=MAX_CAVITIES as i64, None);
    let cols = s.int_in("cols", 1..=MAX_CAVITIES as i64, None);
    let pair = |key: &str, range, what: &str| match s.int_list(key, Some(2), range, what) {
        Some(Some(v)) => Some((v[0], v[1])),
        Some(None) => {
            s.problem(key, format!("is required in a grid layout: {what}"));
            None
        }
        None => None,
    };
    let first = pair(
        "first",
        0..=PIXELS,
        "[x, y] of cavity 1's centre, in pixels",
    );
    let pitch = pair(
        "pitch",
        -PIXELS..=PIXELS,
        "[x, y] from one cavity's centre to the next, in pixels",
    );
    let size = pair(
        "size",
        1..=PIXELS,
        "[width, height] of each cavity, in pixels",
    );
    let (rows, cols) = (rows?, cols?);
    if rows * cols > MAX_CAVITIES as i64 {
        s.problem(
            "rows",
            format!(
                "{rows} x {cols} = {} cavities: at most {MAX_CAVITIES} (a cycle's reject map is one 64-bit word)",
                rows * cols
            ),
        );
        return None;
    }
    let (first, pitch, size) = (first?, pitch?, size?);
    match CavityLayout::grid_rects(
        rows as u16,
        cols as u16,
        first,
        pitch,
        (size.0 as u32, size.1 as u32),
    ) {
        Ok(rects) => Some((rects, Some((rows as u16, cols as u16)))),
        Err(problems) => {
            for problem in problems {
                s.problem("first", problem);
            }
            None
        }
    }
}

fn read_list(s: &Section) -> Option<Rects> {
    let rows = s.int_rows("cavities", 4, 0..=PIXELS, "x, y, width, height")?;
    let rects = rows?
        .into_iter()
        .map(|r| CavityRect {
            x: r[0] as u32,
            y: r[1] as u32,
            width: r[2] as u32,
            height: r[3] as u32,
        })
        .collect();
    Some((rects, None))
}
