//! A camera's cavity layout (`[source.layout]`, `[cameras.NAME.layout]`):
//! where each cavity of one machine cycle lies in the frame, as
//! `validate::layout` reads it, and the pure rules on it: which cavities
//! are judged, where each is cropped, and whether a frame fits.
//!
//! Cavities are numbered from 1, row by row (left to right, top to bottom),
//! as machines number them; a list of `cavities` is numbered in its order.
//! A disabled cavity (empty on the tool) keeps its number, is never cropped
//! and never fails the cycle.

use std::fmt;

/// Most cavities of one layout: a cycle's reject map is one 64-bit word
/// (Modbus input registers 12 to 15, `reject_mask` in the result line).
pub const MAX_CAVITIES: usize = 64;

/// A rectangle of the frame, in pixels: top-left corner and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CavityRect {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

impl CavityRect {
    fn right(&self) -> u64 {
        u64::from(self.x) + u64::from(self.width)
    }

    fn bottom(&self) -> u64 {
        u64::from(self.y) + u64::from(self.height)
    }

    /// Whether the two share any pixel (touching edges do not).
    fn overlaps(&self, other: &CavityRect) -> bool {
        u64::from(self.x) < other.right()
            && u64::from(other.x) < self.right()
            && u64::from(self.y) < other.bottom()
            && u64::from(other.y) < self.bottom()
    }
}

impl fmt::Display for CavityRect {
    /// `[x, y, w, h]`, as `cavities` takes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}, {}, {}, {}]",
            self.x, self.y, self.width, self.height
        )
    }
}

/// The cavities of one camera's frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CavityLayout {
    /// Every cavity of the tool, cavity `n` at index `n - 1`.
    cavities: Vec<CavityRect>,
    /// Bit `n - 1` set: cavity `n` is judged (not `disabled`).
    enabled: u64,
    /// Pixels added on every side of a cavity's region before it is
    /// cropped (clipped to the frame): the models see a seal with the
    /// same border around it as in the frames they were trained on.
    pub margin: u32,
    /// `(rows, cols)` of a grid layout, for drawing the heat map; `None`
    /// for a list of `cavities`.
    pub grid: Option<(u16, u16)>,
}

/// A frame that a layout does not fit: the first cavity outside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutMisfit {
    pub cavity: u16,
    pub rect: CavityRect,
    pub frame: (u32, u32),
}

impl fmt::Display for LayoutMisfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cavity {} at {} reaches past the {}x{} frame (to x {}, y {}): the camera's frame size and the layout disagree; fix [source.layout] (or [cameras.NAME.layout]) or the camera's resolution",
            self.cavity,
            self.rect,
            self.frame.0,
            self.frame.1,
            self.rect.right(),
            self.rect.bottom()
        )
    }
}

impl CavityLayout {
    /// A layout of `cavities` (cavity `n` at index `n - 1`) with the
    /// numbers in `disabled` left out; every problem found, each naming its
    /// cavity: more than `MAX_CAVITIES`, a disabled number that is no
    /// cavity, two cavities that overlap or are the same region.
    pub fn new(
        cavities: Vec<CavityRect>,
        disabled: &[u16],
        margin: u32,
        grid: Option<(u16, u16)>,
    ) -> Result<CavityLayout, Vec<String>> {
        let mut problems = Vec::new();
        if cavities.is_empty() {
            problems.push("the layout has no cavity".to_string());
        }
        if cavities.len() > MAX_CAVITIES {
            problems.push(format!(
                "{} cavities: at most {MAX_CAVITIES} (a cycle's reject map is one 64-bit word)",
                cavities.len()
            ));
        }
        let count = cavities.len().min(MAX_CAVITIES);
        let mut enabled = if count == 64 {
            u64::MAX
        } else {
            (1u64 << count) - 1
        };
        for &n in disabled {
            if n == 0 || usize::from(n) > count {
                problems.push(format!(
                    "disabled cavity {n} is not a cavity of this layout (1 to {count})"
                ));
            } else {
                enabled &= !(1u64 << (n - 1));
            }
        }
        if count > 0 && enabled == 0 {
            problems.push("every cavity is disabled: nothing would be judged".to_string());
        }
        for (i, a) in cavities.iter().enumerate() {
            if a.width == 0 || a.height == 0 {
                problems.push(format!("cavity {} at {a} has no area", i + 1));
            }
            for (j, b) in cavities.iter().enumerate().skip(i + 1) {
                if a == b {
                    problems.push(format!(
                        "cavities {} and {} are the same region {a}: list each cavity once",
                        i + 1,
                        j + 1
                    ));
                } else if a.overlaps(b) {
                    problems.push(format!(
                        "cavities {} at {a} and {} at {b} overlap: a pixel would be judged twice",
                        i + 1,
                        j + 1
                    ));
                }
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(CavityLayout {
            cavities,
            enabled,
            margin,
            grid,
        })
    }

    /// The cavities of a `rows` x `cols` grid: cavity 1's centre at
    /// `first`, the next one `pitch` further (x along a row, y down the
    /// rows), each `size` big. A cavity whose region would start left of or
    /// above the frame is a problem naming it.
    pub fn grid_rects(
        rows: u16,
        cols: u16,
        first: (i64, i64),
        pitch: (i64, i64),
        size: (u32, u32),
    ) -> Result<Vec<CavityRect>, Vec<String>> {
        let mut rects = Vec::with_capacity(usize::from(rows) * usize::from(cols));
        let mut problems = Vec::new();
        for row in 0..i64::from(rows) {
            for col in 0..i64::from(cols) {
                let number = rects.len() + problems.len() + 1;
                let x = first.0 + col * pitch.0 - i64::from(size.0 / 2);
                let y = first.1 + row * pitch.1 - i64::from(size.1 / 2);
                match (u32::try_from(x), u32::try_from(y)) {
                    (Ok(x), Ok(y)) => rects.push(CavityRect {
                        x,
                        y,
                        width: size.0,
                        height: size.1,
                    }),
                    _ => problems.push(format!(
                        "cavity {number} (row {}, column {}) would start at x {x}, y {y}: outside the frame; check first, pitch and size",
                        row + 1,
                        col + 1
                    )),
                }
            }
        }
        if problems.is_empty() {
            Ok(rects)
        } else {
            Err(problems)
        }
    }

    /// A test layout: `cavities` 10x10 cavities side by side in one row,
    /// `disabled` left out, no margin.
    #[cfg(test)]
    pub(crate) fn in_a_row(cavities: u32, disabled: &[u16]) -> CavityLayout {
        let rects = (0..cavities)
            .map(|i| CavityRect {
                x: i * 10,
                y: 0,
                width: 10,
                height: 10,
            })
            .collect();
        CavityLayout::new(rects, disabled, 0, None).expect("a row of cavities is a layout")
    }

    /// Cavities of the tool, disabled ones included.
    pub fn count(&self) -> u16 {
        self.cavities.len() as u16
    }

    /// Bit `n - 1` set for each judged cavity `n`.
    pub fn enabled_mask(&self) -> u64 {
        self.enabled
    }

    pub fn is_enabled(&self, number: u16) -> bool {
        number >= 1 && number <= self.count() && self.enabled & (1u64 << (number - 1)) != 0
    }

    /// The judged cavities' numbers, in order.
    pub fn enabled(&self) -> impl Iterator<Item = u16> + '_ {
        (1..=self.count()).filter(|&n| self.is_enabled(n))
    }

    pub fn enabled_count(&self) -> u16 {
        self.enabled.count_ones() as u16
    }

    /// Cavity `number`'s region as configured (no margin).
    ///
    /// # Panics
    /// If `number` is not a cavity of the layout (1 to `count()`).
    pub fn rect(&self, number: u16) -> CavityRect {
        self.cavities[usize::from(number) - 1]
    }

    /// What is cropped for cavity `number` in a `frame` (width, height)
    /// that fits the layout (`check_frame`): its region grown by `margin`
    /// on every side, clipped to the frame.
    pub fn crop(&self, number: u16, frame: (u32, u32)) -> CavityRect {
        let r = self.rect(number);
        let x0 = r.x.saturating_sub(self.margin);
        let y0 = r.y.saturating_sub(self.margin);
        let x1 = (r.right() + u64::from(self.margin)).min(u64::from(frame.0)) as u32;
        let y1 = (r.bottom() + u64::from(self.margin)).min(u64::from(frame.1)) as u32;
        CavityRect {
            x: x0,
            y: y0,
            width: x1.saturating_sub(x0),
            height: y1.saturating_sub(y0),
        }
    }

    /// The first two cavities whose crops (regions grown by `margin`,
    /// before clipping) overlap: the margin is more than half the gap
    /// between them, so each crop takes in the edge of the other's cell (a
    /// seam the models were not trained on). `None` when the margins stay
    /// within the gaps.
    pub fn margin_reaches_a_neighbour(&self) -> Option<(u16, u16)> {
        let m = self.margin;
        let grown = |a: &CavityRect| {
            let (x, y) = (a.x.saturating_sub(m), a.y.saturating_sub(m));
            CavityRect {
                x,
                y,
                width: a.width + (a.x - x) + m,
                height: a.height + (a.y - y) + m,
            }
        };
        for (i, a) in self.cavities.iter().enumerate() {
            let a = grown(a);
            for (j, b) in self.cavities.iter().enumerate().skip(i + 1) {
                if a.overlaps(&grown(b)) {
                    return Some((i as u16 + 1, j as u16 + 1));
                }
            }
        }
        None
    }

    /// Whether every cavity (margin aside, which is clipped) lies inside a
    /// frame of `width` x `height`; else the first one that does not.
    pub fn check_frame(&self, width: u32, height: u32) -> Result<(), LayoutMisfit> {
        match self
            .cavities
            .iter()
            .position(|r| r.right() > u64::from(width) || r.bottom() > u64::from(height))
        {
            None => Ok(()),
            Some(i) => Err(LayoutMisfit {
                cavity: i as u16 + 1,
                rect: self.cavities[i],
                frame: (width, height),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(x: u32, y: u32, width: u32, height: u32) -> CavityRect {
        CavityRect {
            x,
            y,
            width,
            height,
        }
    }

    fn grid_2x3() -> CavityLayout {
        let rects = CavityLayout::grid_rects(2, 3, (320, 180), (640, 360), (600, 340)).unwrap();
        CavityLayout::new(rects, &[5], 20, Some((2, 3))).unwrap()
    }

    #[test]
    fn a_grid_is_numbered_row_by_row_from_its_first_centre() {
        let layout = grid_2x3();
        assert_eq!(layout.count(), 6);
        assert_eq!(layout.rect(1), rect(20, 10, 600, 340));
        assert_eq!(layout.rect(3), rect(1300, 10, 600, 340));
        assert_eq!(layout.rect(4), rect(20, 370, 600, 340));
        assert_eq!(layout.rect(6), rect(1300, 370, 600, 340));
        assert_eq!(layout.enabled().collect::<Vec<_>>(), [1, 2, 3, 4, 6]);
        assert_eq!(layout.enabled_mask(), 0b10_1111);
        assert_eq!(layout.enabled_count(), 5);
        assert!(!layout.is_enabled(5) && !layout.is_enabled(0) && !layout.is_enabled(7));
    }

    #[test]
    fn a_crop_is_the_region_and_its_margin_clipped_to_the_frame() {
        let layout = grid_2x3();
        // 20 px of margin fits on every side but the frame's edges.
        assert_eq!(layout.crop(1, (1920, 720)), rect(0, 0, 640, 370));
        assert_eq!(layout.crop(2, (1920, 720)), rect(640, 0, 640, 370));
        assert_eq!(layout.crop(6, (1920, 720)), rect(1280, 350, 640, 370));
    }

    #[test]
    fn a_frame_smaller_than_the_layout_names_the_first_cavity_outside_it() {
        let layout = grid_2x3();
        assert_eq!(layout.check_frame(1920, 720), Ok(()));
        let misfit = layout.check_frame(1280, 720).unwrap_err();
        assert_eq!(misfit.cavity, 3);
        let text = misfit.to_string();
        assert!(
            text.contains("cavity 3 at [1300, 10, 600, 340]") && text.contains("1280x720"),
            "{text}"
        );
        assert_eq!(layout.check_frame(1920, 700).unwrap_err().cavity, 4);
    }

    #[test]
    fn overlapping_duplicate_and_too_many_cavities_are_each_named() {
        let problems = CavityLayout::new(
            vec![
                rect(0, 0, 100, 100),
                rect(50, 50, 100, 100),
                rect(0, 0, 100, 100),
                rect(100, 0, 10, 10),
            ],
            &[9],
            0,
            None,
        )
        .unwrap_err();
        let all = problems.join("\n");
        assert!(
            all.contains("cavities 1 at [0, 0, 100, 100] and 2 at [50, 50, 100, 100] overlap"),
            "{all}"
        );
        assert!(
            all.contains("cavities 1 and 3 are the same region"),
            "{all}"
        );
        assert!(all.contains("disabled cavity 9 is not a cavity"), "{all}");
        // Cavity 4 touches cavity 1's edge: no overlap.
        assert!(!all.contains(" and 4 "), "{all}");
        let many = (0..65).map(|i| rect(i * 10, 0, 10, 10)).collect();
        let problems = CavityLayout::new(many, &[], 0, None).unwrap_err();
        assert!(
            problems[0].contains("65 cavities: at most 64"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_grid_cavity_left_of_the_frame_is_named() {
        let problems =
            CavityLayout::grid_rects(1, 2, (100, 100), (-150, 0), (100, 100)).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].starts_with("cavity 2 (row 1, column 2) would start at x -100"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_margin_wider_than_the_gap_is_found_with_the_neighbour_it_reaches() {
        let rects = CavityLayout::grid_rects(2, 3, (320, 180), (640, 360), (600, 340)).unwrap();
        // 40 px between columns and 20 px between rows: 10 px of margin stays clear.
        let fits = CavityLayout::new(rects.clone(), &[], 10, Some((2, 3))).unwrap();
        assert_eq!(fits.margin_reaches_a_neighbour(), None);
        let reaches = CavityLayout::new(rects, &[], 11, Some((2, 3))).unwrap();
        assert_eq!(reaches.margin_reaches_a_neighbour(), Some((1, 4)));
    }

    #[test]
    fn sixty_four_cavities_fill_the_mask() {
        let rects = (0..64).map(|i| rect(i * 10, 0, 10, 10)).collect();
        let layout = CavityLayout::new(rects, &[64], 0, None).unwrap();
        assert_eq!(layout.enabled_mask(), u64::MAX >> 1);
        assert_eq!(layout.enabled_count(), 63);
        assert!(CavityLayout::new(vec![rect(0, 0, 1, 1)], &[1], 0, None).is_err());
    }
}
