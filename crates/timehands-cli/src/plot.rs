//! SVG plots, drawn with plotters into a string (the caller writes the file,
//! so that an unwritable path fails as every other output does).
//!
//! Two shapes serve every tool: line charts of series against a common x
//! (threads, seconds), stacked one above the other; and horizontal bars, one
//! per named row, each with a whisker for its spread or uncertainty.

use std::ops::Range;

use plotters::prelude::*;

const WIDTH: u32 = 900;
const CHART_HEIGHT: u32 = 420;
const BAR_HEIGHT: u32 = 32;

/// The colours of a bar chart's groups, in order (blue, orange, green: told
/// apart by most colour-blind readers too).
pub const GROUP_COLOURS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
];

/// One line of a chart.
pub struct Series {
    /// The legend's name for it.
    pub name: String,
    /// Its points, x ascending.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
pub struct Chart {
    /// The caption.
    pub title: String,
    /// What x is, with its unit.
    pub x: String,
    /// What y is, with its unit.
    pub y: String,
    /// Whether x takes whole numbers only (threads), to be labelled as such.
    pub whole_x: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// One bar: a value with a whisker from `low` to `high`.
pub struct Bar {
    /// The row's name.
    pub name: String,
    /// Where the bar ends (it starts at 0).
    pub value: f64,
    /// The whisker's left end.
    pub low: f64,
    /// The whisker's right end.
    pub high: f64,
    /// Its group, an index into [`Bars::groups`]: its colour and legend.
    pub group: usize,
}

/// `charts` one above the other, as an SVG document.
pub fn lines(charts: &[Chart]) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let height = CHART_HEIGHT * charts.len().max(1) as u32;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        for (chart, area) in charts.iter().zip(root.split_evenly((charts.len(), 1))) {
            let points = chart.series.iter().flat_map(|s| s.points.iter());
            let x = span(points.clone().map(|p| p.0));
            let y = span(points.map(|p| p.1));
            let mut plot = ChartBuilder::on(&area)
                .caption(&chart.title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(80)
                .build_cartesian_2d(x, y)?;
            let mut mesh = plot.configure_mesh();
            mesh.x_desc(chart.x.as_str()).y_desc(chart.y.as_str());
            // Ticks between whole numbers stay unlabelled.
            let whole = |x: &f64| {
                if x.fract() == 0.0 {
                    format!("{x:.0}")
                } else {
                    String::new()
                }
            };
            if chart.whole_x {
                let distinct = chart
                    .series
                    .iter()
                    .map(|s| s.points.len())
                    .max()
                    .unwrap_or(1);
                mesh.x_labels(distinct.min(16)).x_label_formatter(&whole);
            }
            mesh.draw()?;
            for (i, series) in chart.series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                plot.draw_series(LineSeries::new(
                    series.points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(series.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
                plot.draw_series(
                    series
                        .points
                        .iter()
                        .map(|&p| Circle::new(p, 3, color.filled())),
                )?;
            }
            plot.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// A chart of horizontal bars, one row per bar.
pub struct Bars {
    /// The caption.
    pub title: String,
    /// What x is, with its unit.
    pub x: String,
    /// The rows, top to bottom.
    pub bars: Vec<Bar>,
    /// The legend's name of each group of bars, coloured by
    /// [`GROUP_COLOURS`] in order; the legend shows the groups that have bars.
    pub groups: Vec<String>,
}

/// `charts` of bars one above the other, as an SVG document.
pub fn bars(charts: &[Bars]) -> anyhow::Result<String> {
    let rows_of = |chart: &Bars| 120 + BAR_HEIGHT * chart.bars.len() as u32;
    let mut svg = String::new();
    {
        let height = charts.iter().map(rows_of).sum::<u32>().max(1);
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut rest = root.clone();
        for chart in charts {
            let (area, below) = rest.split_vertically(rows_of(chart));
            draw_bars(&area, chart)?;
            rest = below;
        }
        root.present()?;
    }
    Ok(svg)
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &Bars,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let bars = &chart.bars;
    let ends = bars.iter().flat_map(|b| [0.0, b.value, b.low, b.high]);
    let mut x = span(ends);
    if !chart.groups.is_empty() {
        // Room on the right for the legend, clear of the bars.
        x.end += (x.end - x.start) * 0.45;
    }
    // Bars run top to bottom: row i is centred on y = last - i.
    let last = bars.len().saturating_sub(1) as f64;
    let y_of = |row: usize| last - row as f64;
    let mut plot = ChartBuilder::on(area)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(300)
        .build_cartesian_2d(x, -0.5..last + 0.5)?;
    // Ticks at least every half row, so that every whole y (a row's centre)
    // gets one; only those are labelled.
    let name = |y: &f64| {
        let row = last - y;
        if row.fract() == 0.0 && row >= 0.0 {
            bars.get(row as usize)
                .map_or_else(String::new, |b| b.name.clone())
        } else {
            String::new()
        }
    };
    plot.configure_mesh()
        .x_desc(chart.x.as_str())
        .y_labels(2 * bars.len() + 2)
        .y_label_formatter(&name)
        .disable_y_mesh()
        .draw()?;
    for (group, name) in chart.groups.iter().enumerate() {
        if !bars.iter().any(|b| b.group == group) {
            continue;
        }
        let colour = GROUP_COLOURS[group % GROUP_COLOURS.len()];
        plot.draw_series(
            bars.iter()
                .enumerate()
                .filter(|(_, bar)| bar.group == group)
                .map(|(row, bar)| {
                    let y = y_of(row);
                    Rectangle::new([(0.0, y - 0.3), (bar.value, y + 0.3)], colour.filled())
                }),
        )?
        .label(name.as_str())
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], colour.filled()));
    }
    plot.draw_series(bars.iter().enumerate().map(|(row, bar)| {
        let y = y_of(row);
        PathElement::new([(bar.low, y), (bar.high, y)], BLACK.stroke_width(2))
    }))?;
    if !chart.groups.is_empty() {
        plot.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    Ok(())
}

/// The range that `values` span, widened a little so that no point sits on
/// the frame, and never empty (one value, or none, gets a unit's room).
fn span(values: impl Iterator<Item = f64>) -> Range<f64> {
    let (low, high) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if low > high {
        return 0.0..1.0;
    }
    let room = if high > low { (high - low) * 0.05 } else { 1.0 };
    low - room..high + room
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_leaves_room_and_is_never_empty() {
        assert_eq!(span([0.0, 10.0].into_iter()), -0.5..10.5);
        assert_eq!(span([3.0].into_iter()), 2.0..4.0);
        assert_eq!(span([f64::NAN].into_iter()), 0.0..1.0);
        assert_eq!(span(std::iter::empty()), 0.0..1.0);
    }

    #[test]
    fn charts_and_bars_render_as_svg() {
        let chart = Chart {
            title: "t".into(),
            x: "x".into(),
            y: "y".into(),
            whole_x: true,
            series: vec![Series {
                name: "a line".into(),
                points: vec![(1.0, 2.0), (2.0, 3.0)],
            }],
        };
        let svg = lines(&[chart]).expect("drawn");
        assert!(svg.starts_with("<svg") && svg.contains("a line"), "{svg}");
        for rows in [1, 2, 7, 13] {
            let bars = Bars {
                title: "b".into(),
                x: "ns".into(),
                bars: (0..rows)
                    .map(|i| Bar {
                        name: format!("bar number {i}"),
                        value: f64::from(i),
                        low: 0.0,
                        high: f64::from(i) + 1.0,
                        group: (i % 2) as usize,
                    })
                    .collect(),
                groups: vec!["even rows".into(), "odd rows".into()],
            };
            let svg = super::bars(&[bars]).expect("drawn");
            for i in 0..rows {
                assert!(
                    svg.contains(&format!(">\nbar number {i}\n<")),
                    "{rows} rows: no label {i} in {svg}"
                );
            }
            // A legend entry for each group that has bars.
            assert!(svg.contains(">\neven rows\n<"), "{svg}");
            assert_eq!(svg.contains(">\nodd rows\n<"), rows > 1, "{svg}");
        }
    }
}
