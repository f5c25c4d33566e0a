//! What a person sees, seen as they see it: a picture or a page rendered by a real browser
//! (Debian's headless Chromium) into a PNG kept under target/pictures/ for people to look at,
//! its pixels, and where an SVG says it put its text and axes.

use std::path::PathBuf;
use std::process::Command;

/// Where the renderings are kept (CI prints their paths).
pub fn artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pictures");
    std::fs::create_dir_all(&dir).expect("create target/pictures");
    dir
}

/// A rendering: RGB pixels, row by row.
pub struct Screenshot {
    pub path: PathBuf,
    pub width: u32,
    pub height: u32,
    rgb: Vec<u8>,
}

/// Renders `url` in headless Chromium in a window of `size` CSS pixels, one device pixel each,
/// into target/pictures/`name`.png, and reads the PNG back.
pub fn screenshot(url: &str, size: (u32, u32), name: &str) -> Screenshot {
    let path = artifacts().join(format!("{name}.png"));
    let _ = std::fs::remove_file(&path);
    // A profile of its own: Chromium refuses a profile another instance holds, and the tests
    // of a binary screenshot side by side.
    static RENDERINGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RENDERINGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let profile = tempdir(&format!("chromium-profile-{n}"));
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            &format!("--user-data-dir={}", profile.display()),
            &format!("--window-size={},{}", size.0, size.1),
            &format!("--screenshot={}", path.display()),
            url,
        ])
        .output()
        .unwrap_or_else(|e| panic!("run chromium ({e}): scripts/install-deps installs it"));
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success() && path.exists(),
        "chromium did not render {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&path).expect("open the PNG"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("the PNG's pixels");
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "{info:?}");
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    Screenshot {
        path,
        width: info.width,
        height: info.height,
        rgb,
    }
}

fn tempdir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("iostack-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

impl Screenshot {
    pub fn pixel(&self, x: i32, y: i32) -> [u8; 3] {
        assert!(
            x >= 0 && y >= 0 && (x as u32) < self.width && (y as u32) < self.height,
            "({x}, {y}) is outside the {}x{} rendering {}",
            self.width,
            self.height,
            self.path.display()
        );
        let i = 3 * (y as usize * self.width as usize + x as usize);
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// A colour (a heat map's cell, a chart's part), not white, grey or black (the page, text,
    /// axes).
    pub fn coloured(&self, x: i32, y: i32) -> bool {
        let p = self.pixel(x, y);
        let (max, min) = (*p.iter().max().unwrap(), *p.iter().min().unwrap());
        max - min > 40
    }

    /// Ink: black or grey (text, an axis; a one-pixel line between two pixels is drawn as two
    /// of 50% grey).
    pub fn ink(&self, x: i32, y: i32) -> bool {
        let p = self.pixel(x, y);
        let (max, min) = (*p.iter().max().unwrap(), *p.iter().min().unwrap());
        max < 200 && max - min < 30
    }

    /// Whether anything was written or drawn in ink in the box.
    pub fn has_ink(&self, (x0, y0): (i32, i32), (x1, y1): (i32, i32)) -> bool {
        (y0.max(0)..y1.min(self.height as i32))
            .any(|y| (x0.max(0)..x1.min(self.width as i32)).any(|x| self.ink(x, y)))
    }

    /// Where the first dark vertical line of at least `length` pixels starts (top end),
    /// scanning left to right: a chart's y axis.
    pub fn first_vertical_line(&self, length: i32) -> Option<(i32, i32)> {
        for x in 0..self.width as i32 {
            let mut run = 0;
            for y in 0..self.height as i32 {
                run = if self.ink(x, y) { run + 1 } else { 0 };
                if run >= length {
                    return Some((x, y + 1 - run));
                }
            }
        }
        None
    }

    /// The relative luminance of a pixel (darker is less).
    pub fn luminance(&self, x: i32, y: i32) -> f64 {
        let [r, g, b] = self.pixel(x, y);
        0.2126 * r as f64 + 0.7152 * g as f64 + 0.0722 * b as f64
    }
}

/// One `<text>` of an SVG: its anchor point and what it says.
#[derive(Clone, Debug)]
pub struct SvgText {
    pub x: f64,
    pub y: f64,
    pub text: String,
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(tag[start..start + len].to_string())
}

/// Every `<text>` of an SVG, in order.
pub fn svg_texts(svg: &str) -> Vec<SvgText> {
    svg.split("<text")
        .skip(1)
        .filter_map(|rest| {
            let tag_end = rest.find('>')?;
            let tag = &rest[..tag_end];
            let body = &rest[tag_end + 1..rest.find("</text>")?];
            Some(SvgText {
                x: attribute(tag, "x")?.parse().ok()?,
                y: attribute(tag, "y")?.parse().ok()?,
                text: body.trim().replace("&apos;", "'").replace("&amp;", "&"),
            })
        })
        .collect()
}

/// Every straight two-point `<polyline>` of an SVG: ((x0, y0), (x1, y1)).
pub fn svg_lines(svg: &str) -> Vec<((i32, i32), (i32, i32))> {
    svg.split("<polyline")
        .skip(1)
        .filter_map(|rest| {
            let points = attribute(&rest[..rest.find('>')?], "points")?;
            let p: Vec<i32> = points
                .split([' ', ','])
                .filter(|s| !s.is_empty())
                .map(|v| v.parse().ok())
                .collect::<Option<_>>()?;
            (p.len() == 4).then(|| ((p[0], p[1]), (p[2], p[3])))
        })
        .collect()
}

/// The size an SVG says it is.
pub fn svg_size(svg: &str) -> (u32, u32) {
    let tag = &svg[svg.find("<svg").expect("an SVG")..];
    let tag = &tag[..tag.find('>').unwrap()];
    let get = |n| {
        attribute(tag, n)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("the SVG has no {n}: {tag}"))
    };
    (get("width"), get("height"))
}

/// One filled `<rect>` of an SVG, in the SVG's pixels, with its fill colour.
#[derive(Clone, Copy, Debug)]
pub struct SvgRect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    pub fill: [u8; 3],
}

/// Every `<rect>` of an SVG with a `#RRGGBB` fill, in order.
pub fn svg_rects(svg: &str) -> Vec<SvgRect> {
    svg.split("<rect")
        .skip(1)
        .filter_map(|rest| {
            let tag = &rest[..rest.find('>')?];
            let number = |n| attribute(tag, n)?.parse::<f64>().ok();
            let fill = attribute(tag, "fill")?;
            let hex = fill.strip_prefix('#').filter(|h| h.len() == 6)?;
            let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
            Some(SvgRect {
                x: number("x")?,
                y: number("y")?,
                width: number("width")?,
                height: number("height")?,
                fill: [byte(0)?, byte(2)?, byte(4)?],
            })
        })
        .collect()
}
