//! LOLWUT (Redis's `lolwut.c`, `lolwut5.c`, `lolwut6.c`): computer art and
//! the server's version.
//!
//! `LOLWUT [VERSION v] [args...]` picks an edition by version number, as
//! Redis 7.0 does: 5 draws Georg Nees's *Schotter* (rows of squares that
//! tumble more the lower they are) in braille characters, 6 draws a city
//! skyline in the four grey levels of a colour terminal, and every other
//! version — the default one, 7.0.15, included — prints only
//! `Redis ver. 7.0.15`. Everything drawn comes from a pixel [`Canvas`];
//! the editions differ in how they fill it and how they render it.
//!
//! Redis draws with C's `rand()`, seeded once at start-up from the clock
//! and its pid, so its art differs from run to run; Vireo draws from a
//! fresh random generator per call. The parts that are not random (the
//! canvas's size, the first two rows of squares, the captions) match
//! Redis byte for byte, including its float arithmetic: Schotter computes
//! in C `float` with `double` trigonometry, mirrored here with `f32` and
//! `f64`.

use vireo_resp::Args;

use super::{flags::*, is, spec, CommandSpec, Ctx, KeySpec};
use crate::server::REDIS_VERSION;

/// This family's commands.
pub const COMMANDS: &[CommandSpec] = &[spec("lolwut", -1, READONLY | FAST, KeySpec::None, lolwut)];

/// LOLWUT [VERSION v] [edition arguments...].
fn lolwut(ctx: &mut Ctx<'_>, args: Args<'_>) {
    let mut first_extra = 1;
    let mut version = None;
    if args.len() >= 3 && is(args.get(1), "version") {
        let Some(v) = ctx.int_arg(args.get(2)) else {
            return;
        };
        // Redis formats the number as a C `unsigned int`: it wraps.
        version = Some(v as u32);
        first_extra = 3;
    }
    let extra: Vec<&[u8]> = args.iter().skip(first_extra).collect();
    let Some(numbers) = int_args(ctx, &extra, edition_arg_count(version)) else {
        return;
    };
    let mut dice = Dice(fastrand::Rng::new());
    let text = match version {
        Some(5) => schotter_text(&numbers, &mut dice),
        Some(6) => skyline_text(&numbers, &mut dice),
        _ => format!("Redis ver. {REDIS_VERSION}\n").into_bytes(),
    };
    ctx.out.verbatim("txt", &text);
}

/// How many of the arguments after VERSION an edition reads (the rest are
/// ignored, as Redis ignores them).
fn edition_arg_count(version: Option<u32>) -> usize {
    match version {
        Some(5) => 3,
        Some(6) => 2,
        _ => 0,
    }
}

/// Parses the first `count` arguments as integers, replying Redis's error
/// for the first that is not one.
fn int_args(ctx: &mut Ctx<'_>, extra: &[&[u8]], count: usize) -> Option<Vec<i64>> {
    extra.iter().take(count).map(|a| ctx.int_arg(a)).collect()
}

/// `numbers[i]`, or `default` when the caller gave fewer, clamped to
/// `lo..=hi` as Redis clamps LOLWUT's sizes to keep it cheap.
fn sized(numbers: &[i64], i: usize, default: i64, lo: i64, hi: i64) -> i32 {
    numbers.get(i).copied().unwrap_or(default).clamp(lo, hi) as i32
}

/// A source of C `rand()`-like numbers: uniform in `0..=RAND_MAX`.
struct Dice(fastrand::Rng);

/// glibc's `RAND_MAX`.
const RAND_MAX: i32 = i32::MAX;

impl Dice {
    /// One draw in `0..=RAND_MAX`.
    fn roll(&mut self) -> i32 {
        self.0.i32(0..=RAND_MAX)
    }
}

/// The square root of 2 as Redis writes it, cut after ten decimals: with
/// the exact constant a size could round to a different radius.
#[allow(clippy::approx_constant)]
const REDIS_SQRT_2: f64 = 1.4142135623;

/// A grid of pixels, each a small colour number; reads and writes outside
/// it are ignored (read as 0), so shapes may stick out of the frame.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    /// A canvas filled with `background`.
    fn new(width: i32, height: i32, background: u8) -> Canvas {
        let cells = width.max(0) as usize * height.max(0) as usize;
        Canvas {
            width,
            height,
            pixels: vec![background; cells],
        }
    }

    /// The index of (x, y), None outside the canvas.
    fn index(&self, x: i32, y: i32) -> Option<usize> {
        let inside = (0..self.width).contains(&x) && (0..self.height).contains(&y);
        inside.then(|| (x + y * self.width) as usize)
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if let Some(i) = self.index(x, y) {
            self.pixels[i] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        self.index(x, y).map_or(0, |i| self.pixels[i])
    }

    /// A straight line between two points, both ends included
    /// (Bresenham's algorithm, stepping as Redis's canvas does).
    fn line(&mut self, (mut x, mut y): (i32, i32), (x2, y2): (i32, i32), color: u8) {
        let (dx, dy) = ((x2 - x).abs(), (y2 - y).abs());
        let (sx, sy) = (if x < x2 { 1 } else { -1 }, if y < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x, y, color);
            if x == x2 && y == y2 {
                return;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x += sx;
            }
            if e2 < dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// The outline of a square of side `side` centred on (x, y), turned by
    /// `angle` radians: its corners lie on a circle, a quarter turn apart.
    /// The arithmetic is C's (`float` values, `double` sin/cos/round) so
    /// corners land on the same pixels as Redis's.
    fn square(&mut self, (x, y): (i32, i32), side: f32, angle: f32, color: u8) {
        let radius = ((side as f64 / REDIS_SQRT_2) as f32 as f64).round();
        let mut k = (std::f64::consts::FRAC_PI_4 + angle as f64) as f32;
        let mut corners = [(0, 0); 4];
        for corner in &mut corners {
            let kd = k as f64;
            *corner = (
                (kd.sin() * radius + x as f64).round() as i32,
                (kd.cos() * radius + y as f64).round() as i32,
            );
            k = (kd + std::f64::consts::FRAC_PI_2) as f32;
        }
        for j in 0..4 {
            self.line(corners[j], corners[(j + 1) % 4], color);
        }
    }
}

/// Edition 5: `LOLWUT VERSION 5 [columns] [squares-per-row]
/// [squares-per-col]` (defaults 66, 8, 12).
fn schotter_text(numbers: &[i64], dice: &mut Dice) -> Vec<u8> {
    let cols = sized(numbers, 0, 66, 1, 1000);
    let per_row = sized(numbers, 1, 8, 1, 200);
    let per_col = sized(numbers, 2, 12, 1, 200);
    let mut text = braille(&schotter(cols, per_row, per_col, dice));
    text.extend_from_slice(
        format!("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {REDIS_VERSION}\n")
            .as_bytes(),
    );
    text
}

/// Draws Schotter for a terminal `cols` characters wide (two pixels each):
/// a grid of squares, straight in the first two rows, then ever more
/// turned and shifted.
fn schotter(cols: i32, per_row: i32, per_col: i32, dice: &mut Dice) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    for row in 0..per_col {
        for col in 0..per_row {
            let mut cx = (col as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut cy = (row as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0;
            if row > 1 {
                let [turn, shift_x, shift_y] = disorder(dice, row, per_col);
                angle = turn;
                cx = (cx as f32 + shift_x * side / 3.0) as i32;
                cy = (cy as f32 + shift_y * side / 3.0) as i32;
            }
            canvas.square((cx, cy), side, angle, 1);
        }
    }
    canvas
}

/// Three random amounts of disorder for a square in `row`: each up to
/// `row / rows` in size, with a random sign (three draws for the sizes,
/// then three for the signs, in Redis's order).
fn disorder(dice: &mut Dice, row: i32, rows: i32) -> [f32; 3] {
    let mut amounts = [0f32; 3];
    for a in &mut amounts {
        *a = dice.roll() as f32 / RAND_MAX as f32 / rows as f32 * row as f32;
    }
    for a in &mut amounts {
        if dice.roll() % 2 != 0 {
            *a = -*a;
        }
    }
    amounts
}

/// Renders a two-colour canvas as braille: each character shows a block
/// two pixels wide and four tall, dot bits numbered as Unicode's braille
/// patterns number them.
fn braille(canvas: &Canvas) -> Vec<u8> {
    /// (dx, dy) of the pixel behind each dot bit, bit 0 first.
    const DOTS: [(i32, i32); 8] = [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
        (0, 3),
        (1, 3),
    ];
    let mut text = Vec::new();
    for y in (0..canvas.height).step_by(4) {
        for x in (0..canvas.width).step_by(2) {
            let bits = DOTS
                .iter()
                .enumerate()
                .filter(|(_, (dx, dy))| canvas.get(x + dx, y + dy) != 0)
                .fold(0u32, |acc, (bit, _)| acc | 1 << bit);
            let dot = char::from_u32(0x2800 + bits).expect("braille patterns are chars");
            text.extend_from_slice(dot.encode_utf8(&mut [0; 4]).as_bytes());
        }
        // Redis's rows end with a newline unless the row started on the
        // canvas's last line; the caption starts with one in any case.
        if y != canvas.height - 1 {
            text.push(b'\n');
        }
    }
    text
}

/// Edition 6: `LOLWUT VERSION 6 [columns] [rows]` (defaults 80, 20).
fn skyline_text(numbers: &[i64], dice: &mut Dice) -> Vec<u8> {
    let cols = sized(numbers, 0, 80, 1, 1000);
    let rows = sized(numbers, 1, 20, 1, 1000);
    let mut canvas = Canvas::new(cols, rows, WHITE);
    skyline(&mut canvas, dice);
    let mut text = grey_levels(&canvas);
    text.extend_from_slice(
        format!(
            "\nDedicated to the 8 bit game developers of past and present.\n\
             Original 8 bit image from Plaguemon by hikikomori. Redis ver. {REDIS_VERSION}\n"
        )
        .as_bytes(),
    );
    text
}

/// The skyline's colours, darkest first.
const BLACK: u8 = 0;
const WHITE: u8 = 3;

/// One building of the skyline.
struct Building {
    /// Column of its left wall (may be off the canvas).
    left: i32,
    width: i32,
    height: i32,
    color: u8,
    /// Whether it has lit windows (the foreground buildings).
    windows: bool,
}

/// Fills a white canvas with a city: two rows of windowless grey buildings
/// behind (the lighter row first, so it stays at the back), then black
/// buildings with random grey windows in front.
fn skyline(canvas: &mut Canvas, dice: &mut Dice) {
    let h = canvas.height;
    for color in [2u8, 1] {
        let mut left = -10;
        while left < canvas.width {
            left += dice.roll() % 8;
            let width = 10 + dice.roll() % 9;
            let spread = if color == 2 { 2 } else { 3 };
            let height = h / 2 + dice.roll() % h / spread;
            building(
                canvas,
                &Building {
                    left,
                    width,
                    height,
                    color,
                    windows: false,
                },
                dice,
            );
            left += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut left = -10;
    while left < canvas.width {
        left += dice.roll() % 8;
        let mut width = 5 + dice.roll() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + dice.roll() % h / 2;
        let front = Building {
            left,
            width,
            height,
            color: BLACK,
            windows: true,
        };
        building(canvas, &front, dice);
        left += width + 5;
    }
}

/// Draws one building from the canvas's bottom line up; its roof is two
/// pixels narrower on each side. Windows sit away from the walls, two
/// pixels wide and one tall, on every other line.
fn building(canvas: &mut Canvas, b: &Building, dice: &mut Dice) {
    let bottom = canvas.height - 1;
    let top = bottom - b.height + 1;
    let right = b.left + b.width;
    for y in (top..=bottom).rev() {
        for x in b.left..right {
            if y == top && (x <= b.left + 1 || x >= right - 2) {
                continue;
            }
            let inner = x > b.left + 1 && x < right - 2 && y > top + 1 && y < bottom - 1;
            let mut color = b.color;
            if b.windows && inner {
                let (relx, rely) = (x - (b.left + 1), y - (top + 1));
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    color = window_color(dice, b.color);
                    // The window's right pixel repeats its left one.
                    if relx % 2 != 0 {
                        color = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.set(x, y, color);
        }
    }
}

/// A random grey (1 or 2) other than the wall's colour.
fn window_color(dice: &mut Dice, wall: u8) -> u8 {
    loop {
        let color = 1 + (dice.roll() % 2) as u8;
        if color != wall {
            return color;
        }
    }
}

/// Renders the canvas one space per pixel, painted with the terminal's
/// black, dark grey, light grey or white (foreground and background both).
fn grey_levels(canvas: &Canvas) -> Vec<u8> {
    let mut text = Vec::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let paint = match canvas.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            text.extend_from_slice(format!("\x1b[{paint} \x1b[0m").as_bytes());
        }
        if y != canvas.height - 1 {
            text.push(b'\n');
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dice(seed: u64) -> Dice {
        Dice(fastrand::Rng::with_seed(seed))
    }

    /// The braille rows of a Schotter rendering, caption left out.
    fn art_lines(text: &[u8]) -> Vec<String> {
        let s = String::from_utf8(text.to_vec()).unwrap();
        s.lines()
            .take_while(|l| !l.starts_with("Georg"))
            .map(String::from)
            .collect()
    }

    #[test]
    fn lines_include_both_ends_in_every_direction() {
        for (from, to) in [
            ((1, 1), (6, 3)),
            ((6, 3), (1, 1)),
            ((2, 7), (2, 0)),
            ((0, 5), (7, 5)),
        ] {
            let mut c = Canvas::new(8, 8, 0);
            c.line(from, to, 1);
            assert_eq!(c.get(from.0, from.1), 1);
            assert_eq!(c.get(to.0, to.1), 1);
            let lit = c.pixels.iter().filter(|&&p| p == 1).count() as i32;
            let steps = (to.0 - from.0).abs().max((to.1 - from.1).abs()) + 1;
            assert_eq!(lit, steps, "{from:?} -> {to:?}");
        }
    }

    #[test]
    fn drawing_outside_the_canvas_is_ignored() {
        let mut c = Canvas::new(4, 3, 0);
        c.line((-5, -5), (10, 10), 1);
        assert_eq!(c.get(-1, 0), 0);
        assert_eq!(c.get(4, 0), 0);
        assert_eq!((0..3).filter(|&i| c.get(i, i) == 1).count(), 3);
    }

    #[test]
    fn an_upright_square_is_a_closed_outline() {
        let mut c = Canvas::new(20, 20, 0);
        c.square((10, 10), 8.0, 0.0, 1);
        // Side 8 is a radius of round(8 / sqrt 2) = 6: corners 10 +- 4.
        for (x, y) in [(6, 6), (14, 6), (6, 14), (14, 14), (10, 6), (6, 10)] {
            assert_eq!(c.get(x, y), 1, "({x}, {y})");
        }
        assert_eq!(c.get(10, 10), 0);
    }

    #[test]
    fn braille_maps_pixels_to_dot_bits() {
        let mut c = Canvas::new(2, 4, 0);
        assert_eq!(braille(&c), "\u{2800}\n".as_bytes());
        c.set(0, 0, 1);
        c.set(1, 3, 1);
        // Bits 0 and 7; a 4-line canvas's only row ends with a newline.
        assert_eq!(braille(&c), "\u{2881}\n".as_bytes());
        let c = Canvas::new(2, 5, 0);
        // Row starting on the last line (y = 4): no newline after it.
        assert_eq!(braille(&c), "\u{2800}\n\u{2800}".as_bytes());
    }

    #[test]
    fn schotter_has_redis_geometry_for_the_default_sizes() {
        let text = schotter_text(&[], &mut dice(1));
        let lines = art_lines(&text);
        // 132 pixels wide, squares of 16 pixels, 12 rows: 196 pixels tall,
        // 49 rows of braille; the last ends with a newline (195 is not a
        // multiple of 4) before the caption's own.
        assert_eq!(lines.len(), 50);
        assert_eq!(lines[49], "");
        assert!(lines[..49].iter().all(|l| l.chars().count() == 66));
        let tail = format!(
            "\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {REDIS_VERSION}\n"
        );
        assert!(text.ends_with(tail.as_bytes()));
    }

    #[test]
    fn schotter_first_two_rows_do_not_depend_on_chance() {
        let a = schotter_text(&[40, 5, 2], &mut dice(1));
        let b = schotter_text(&[40, 5, 2], &mut dice(2));
        assert_eq!(a, b);
        let a = schotter_text(&[40, 5, 9], &mut dice(1));
        let b = schotter_text(&[40, 5, 9], &mut dice(2));
        assert_ne!(a, b);
    }

    #[test]
    fn sizes_are_clamped_as_redis_clamps_them() {
        let tiny = schotter_text(&[-3, 0, -1], &mut dice(3));
        // One column of two pixels, no padding, one square of side 2 whose
        // corners are (2, 2), (2, 0), (0, 0), (0, 2): three pixels inside.
        let caption =
            format!("Georg Nees - schotter, plotter on paper, 1968. Redis ver. {REDIS_VERSION}\n");
        assert_eq!(tiny, format!("\u{280B}\n\n{caption}").into_bytes());
        let sky = skyline_text(&[5000, -2], &mut dice(3));
        let first = sky.split(|&b| b == b'\n').next().unwrap();
        assert_eq!(first.len(), 1000 * "\x1b[0;97;107m \x1b[0m".len());
    }

    #[test]
    fn skyline_has_the_requested_shape_and_four_colours_only() {
        for seed in 0..20 {
            let text = skyline_text(&[30, 12], &mut dice(seed));
            let s = String::from_utf8(text).unwrap();
            let lines: Vec<&str> = s.lines().collect();
            assert_eq!(lines.len(), 12 + 2);
            for line in &lines[..12] {
                let cells: Vec<&str> = line.split("\x1b[0m").filter(|c| !c.is_empty()).collect();
                assert_eq!(cells.len(), 30);
                for c in cells {
                    assert!(
                        [
                            "\x1b[0;30;40m ",
                            "\x1b[0;90;100m ",
                            "\x1b[0;37;47m ",
                            "\x1b[0;97;107m "
                        ]
                        .contains(&c),
                        "{c:?}"
                    );
                }
            }
            assert_eq!(
                lines[12],
                "Dedicated to the 8 bit game developers of past and present."
            );
        }
    }

    #[test]
    fn front_buildings_stand_on_the_bottom_line() {
        let mut canvas = Canvas::new(60, 20, WHITE);
        skyline(&mut canvas, &mut dice(7));
        // Buildings are laid side by side from x = -10 with gaps of at
        // most 7 columns, so the bottom line is never all sky.
        assert!((0..60).any(|x| canvas.get(x, 19) != WHITE));
    }

    #[test]
    fn editions_by_version_number() {
        assert_eq!(edition_arg_count(Some(5)), 3);
        assert_eq!(edition_arg_count(Some(6)), 2);
        assert_eq!(edition_arg_count(Some(7)), 0);
        // -1 is 4294967295 as an unsigned int: the plain edition.
        assert_eq!(edition_arg_count(Some(-1i64 as u32)), 0);
        // 2^32 + 5 wraps to 5.
        assert_eq!(edition_arg_count(Some((1i64 << 32 | 5) as u32)), 3);
    }
}
