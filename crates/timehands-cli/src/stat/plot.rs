//! ministat's ASCII plot: every point as its set's symbol, stacked where
//! points share a column, and under them each set's spread.
//!
//! The horizontal axis covers, over all sets, the minimum, the maximum and
//! mean ± one standard deviation, in `width` columns whose centres are the
//! ends: column `c` holds the values in `[x0 + c dx, x0 + (c+1) dx)`, with
//! `dx = span / (width - 1)` and `x0 = min - dx / 2`.
//!
//! A cell where sets overlap shows the symbol whose index is the bitwise OR
//! of theirs (x = 1, + = 2, so both make 3, `*`): ministat's rule, which is
//! exact for the first two sets and a fair "several" beyond.
//!
//! Under the points, a bar line per set (one shared line unless the bars are
//! separate): `|____|` from mean - sd to mean + sd, `M` at the median and `A`
//! at the mean, drawn in set order so that later sets win a shared cell.
//!
//! The plot is as tall as the last set's highest stack (ministat sizes it for
//! each set in turn and keeps the last size): an earlier set's taller stack is
//! cut to that height. Kept for byte-identical plots; it only hides dots.

use super::SYMBOLS;
use super::sample::Sample;

/// Where the values fall in the columns of a plot.
struct Axis {
    x0: f64,
    dx: f64,
    /// The last column.
    last: usize,
}

impl Axis {
    /// The column of `value`; C's truncating conversion, as ministat's. The
    /// greatest value falls half a column inside the last one, but with
    /// subnormal numbers (a span below 1e-307) the rounding of `dx` can put
    /// it past the end, where ministat writes out of bounds: it is held in.
    fn column(&self, value: f64) -> usize {
        (((value - self.x0) / self.dx) as usize).min(self.last)
    }
}

/// The plot of `samples` in `width` columns (at least 2) inside its border,
/// or ministat's one-line notice when all values are equal.
pub fn render(samples: &[Sample], width: usize, separate_bars: bool) -> String {
    let ends = samples.iter().flat_map(|s| {
        let sd = s.stddev();
        [s.min(), s.max(), s.mean() - sd, s.mean() + sd]
    });
    let (min, max) = ends.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let span = max - min;
    if span == 0.0 {
        return "[no plot, span is zero width]\n".to_string();
    }
    let dx = span / (width as f64 - 1.0);
    let axis = Axis {
        x0: min - 0.5 * dx,
        dx,
        last: width - 1,
    };

    // dots[row][column]: the OR of the symbols' indices; row 0 stays empty.
    let mut dots: Vec<Vec<u8>> = Vec::new();
    let mut bars: Vec<Vec<u8>> = Vec::new();
    for (index, sample) in samples.iter().enumerate() {
        let symbol = index as u8 + 1;
        let columns: Vec<usize> = sample.points().iter().map(|&p| axis.column(p)).collect();
        let tallest = columns
            .chunk_by(|a, b| a == b)
            .map(<[usize]>::len)
            .max()
            .unwrap_or(0);
        dots.resize(tallest + 1, vec![0; width]);
        for run in columns.chunk_by(|a, b| a == b) {
            for (height, &column) in run.iter().enumerate() {
                dots[height + 1][column] |= symbol;
            }
        }
        let bar = if separate_bars || bars.is_empty() {
            bars.push(vec![b' '; width]);
            bars.last_mut().expect("just pushed")
        } else {
            &mut bars[0]
        };
        draw_bar(bar, &axis, sample);
    }

    let border = format!("+{}+\n", "-".repeat(width));
    let mut out = border.clone();
    let dot_lines = dots[1..].iter().rev().map(|row| {
        row.iter()
            .map(|&cell| SYMBOLS[usize::from(cell)])
            .collect::<Vec<u8>>()
    });
    for line in dot_lines.chain(bars) {
        out.push('|');
        out.push_str(std::str::from_utf8(&line).expect("ASCII symbols"));
        out.push_str("|\n");
    }
    out.push_str(&border);
    out
}

/// `sample`'s spread, median and mean on its bar line.
fn draw_bar(bar: &mut [u8], axis: &Axis, sample: &Sample) {
    let (mean, sd) = (sample.mean(), sample.stddev());
    let (left, right) = (axis.column(mean - sd), axis.column(mean + sd));
    bar[right] = b'|';
    bar[left] = b'|';
    for cell in bar.iter_mut().take(right).skip(left + 1) {
        // Only blanks: the markers of earlier sets on a shared line stay.
        if *cell == b' ' {
            *cell = b'_';
        }
    }
    bar[axis.column(sample.median())] = b'M';
    bar[axis.column(mean)] = b'A';
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::stat::sample::Sample;
    use proptest::prelude::*;

    fn sample(points: &[f64]) -> Sample {
        Sample::new("t", points.to_vec()).expect("valid")
    }

    #[test]
    fn subnormal_values_stay_inside_the_plot() {
        let plot = render(&[sample(&[1e-320, 2e-320, 3e-320])], 74, false);
        let lines: Vec<&str> = plot.lines().collect();
        assert!(lines.iter().all(|l| l.len() == 76), "{plot}");
        assert!(lines[1].ends_with("x|"), "{plot}");
    }

    #[test]
    fn equal_values_have_no_plot() {
        let s = sample(&[5.0, 5.0, 5.0]);
        assert_eq!(render(&[s], 10, false), "[no plot, span is zero width]\n");
    }

    // The expected plots are ministat's (Debian 20150715) for the same data.
    #[test]
    fn one_set_in_twenty_columns() {
        let plot = render(&[sample(&[1.0, 2.0, 2.0, 3.0])], 20, false);
        let want = "\
+--------------------+
|          x         |
|x         x        x|
|  |_______A______|  |
+--------------------+
";
        assert_eq!(plot, want);
    }

    #[test]
    fn overlapping_sets_show_a_star_and_separate_bars() {
        let sets = [sample(&[1.0, 2.0, 3.0]), sample(&[3.0, 4.0, 5.0])];
        let want = "\
+---------+
|x x * + +|
||_A_|    |
|    |_A_||
+---------+
";
        assert_eq!(render(&sets, 9, true), want);
    }

    #[test]
    fn the_last_set_s_stack_sets_the_height() {
        // Three equal points of x stack three high, but + has no stack.
        let sets = [sample(&[2.0, 2.0, 2.0, 1.0]), sample(&[1.0, 3.0, 5.0])];
        let plot = render(&sets, 9, false);
        assert_eq!(plot.lines().count(), 4, "{plot}");
    }

    proptest! {
        #[test]
        fn every_line_is_as_wide_as_asked(
            points in prop::collection::vec(-1e3f64..1e3, 3..50),
            width in 2usize..120,
            separate: bool,
        ) {
            let plot = render(&[sample(&points)], width, separate);
            for line in plot.lines().filter(|l| !l.starts_with('[')) {
                prop_assert_eq!(line.len(), width + 2);
            }
        }
    }
}
