//! The typed `kind = "genicam"` source: an industrial camera (GigE Vision,
//! USB3 Vision) through Aravis' `aravissrc`, as `validate::genicam` reads it.

/// A GenICam number that may be left to the camera's own control loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CameraValue {
    /// Left as the camera has it (the key is not in the config).
    Unchanged,
    /// `"auto"`: the camera's continuous auto mode (ExposureAuto, GainAuto).
    Auto,
    /// A fixed value: µs for exposure, dB for gain.
    Fixed(f64),
}

/// What the camera sends, and so what the pipeline turns into RGB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenicamPixelFormat {
    /// 8-bit grey (`Mono8`), converted to RGB by `videoconvert`.
    Mono8,
    /// 8-bit RGB (`RGB8`), as the camera sends it.
    Rgb8,
    /// Raw 8-bit Bayer (`BayerRG8`, `BayerBG8`, ...: whichever pattern the
    /// sensor has), demosaiced by `bayer2rgb`.
    Bayer,
}

impl GenicamPixelFormat {
    pub const NAMES: [&'static str; 3] = ["Mono8", "RGB8", "Bayer"];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// When the camera takes a picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenicamTrigger {
    /// Free run: the camera takes pictures at its own frame rate.
    Off,
    /// Hardware trigger on input line N (`TriggerSource = LineN`): one picture
    /// per edge, e.g. from a photo-eye wired to the camera. Each frame is a part.
    Line(u8),
    /// Software trigger (`TriggerSource = Software`): one picture each time
    /// the program fires the camera's TriggerSoftware command.
    Software,
}

impl GenicamTrigger {
    /// The config's spelling: "off", "line0", "software".
    pub fn name(self) -> String {
        match self {
            GenicamTrigger::Off => "off".into(),
            GenicamTrigger::Line(n) => format!("line{n}"),
            GenicamTrigger::Software => "software".into(),
        }
    }

    /// Parses the config's spelling; `None` for anything else.
    pub fn parse(text: &str) -> Option<GenicamTrigger> {
        match text {
            "off" => Some(GenicamTrigger::Off),
            "software" => Some(GenicamTrigger::Software),
            _ => {
                let digits = text.strip_prefix("line")?;
                if digits.is_empty()
                    || digits.len() > 2
                    || !digits.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                digits.parse().ok().map(GenicamTrigger::Line)
            }
        }
    }
}

/// `kind = "genicam"`.
#[derive(Debug, Clone, PartialEq)]
pub struct GenicamSource {
    /// The camera's GenICam id ("vendor-model-serial", as `sealcheck cameras`
    /// lists it) or IP address; `None`: the first camera found.
    pub camera: Option<String>,
    pub exposure_us: CameraValue,
    pub gain_db: CameraValue,
    /// What the camera is set to send; `None` (the key left out): the camera
    /// keeps the PixelFormat it has, and the pipeline converts what it sends
    /// (Mono8, RGB8 or 8-bit Bayer; another format is refused at start).
    pub pixel_format: Option<GenicamPixelFormat>,
    /// GigE Vision stream packet size in bytes; `None`: negotiated with the
    /// camera (the largest the path carries).
    pub packet_size: Option<u32>,
    /// Any other GenICam feature, `Name=Value` pairs applied in order at start.
    pub features: Vec<(String, String)>,
    pub trigger: GenicamTrigger,
}

/// Parses `features`: whitespace-separated `Name=Value` pairs, as Aravis'
/// own `features` syntax. Names are GenICam feature names (letters, digits, `_`).
pub fn parse_features(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split_whitespace()
        .map(|pair| {
            let Some((name, value)) = pair.split_once('=') else {
                return Err(format!("\"{pair}\" is not Name=Value"));
            };
            let name_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !name_ok {
                return Err(format!("\"{name}\" is not a GenICam feature name"));
            }
            if value.is_empty() {
                return Err(format!("\"{pair}\" has no value"));
            }
            Ok((name.to_string(), value.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigger_names_round_trip_and_reject_the_rest() {
        for t in [
            GenicamTrigger::Off,
            GenicamTrigger::Software,
            GenicamTrigger::Line(0),
            GenicamTrigger::Line(3),
        ] {
            assert_eq!(GenicamTrigger::parse(&t.name()), Some(t));
        }
        for bad in ["line", "lineX", "Line0", "line123", "hardware", ""] {
            assert_eq!(GenicamTrigger::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn features_are_name_value_pairs() {
        assert_eq!(
            parse_features(" Width=256  BalanceWhiteAuto=Off ").unwrap(),
            vec![
                ("Width".into(), "256".into()),
                ("BalanceWhiteAuto".into(), "Off".into())
            ]
        );
        assert!(parse_features("Width").is_err());
        assert!(parse_features("Width=").is_err());
        assert!(parse_features("9x=1").is_err());
        assert!(parse_features("").unwrap().is_empty());
    }
}
