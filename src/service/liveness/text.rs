//! The operator's words for a verdict: the STATUS line `systemctl status` shows, why a
//! stuck source is stuck, and who acts when the pipeline is not alive.

use super::health::{Health, MAX_ABANDONED_IN_A_ROW};

/// Who acts when the pipeline is not alive: systemd, when it set a watchdog
/// (`supervised`), or nobody (`sealcheck run` by hand).
pub fn unhealthy_remedy(supervised: bool) -> &'static str {
    if supervised {
        "watchdog pings stopped, systemd will restart the service"
    } else {
        "no watchdog is set (not run by systemd with WatchdogSec=), so nothing restarts it: restart it by hand"
    }
}

/// The status line systemd shows: what `status_text` says (fps, verdict counts), and
/// what is wrong, when something is.
pub fn status_line(health: &Health, status_text: &str) -> String {
    match health {
        Health::Alive { .. } => status_text.to_string(),
        Health::Idle => format!("idle: source streaming, no frames; {status_text}"),
        // Capture's status text says it: "camera lost since ..., next try in ...".
        Health::SourceLost { .. } => status_text.to_string(),
        Health::WaitingForSource { for_ } => {
            format!(
                "waiting for the source for {:.0} s; {status_text}",
                for_.as_secs_f64()
            )
        }
        Health::Stalled {
            stage,
            for_,
            in_flight,
        } => format!(
            "STALLED at {} for {:.0} s ({in_flight} frames in flight), watchdog pings stopped; {status_text}",
            stage.name(),
            for_.as_secs_f64()
        ),
        Health::Failing { stage, for_ } => format!(
            "FAILING: every frame has failed in {} for {:.0} s, watchdog pings stopped; {status_text}",
            stage.as_str(),
            for_.as_secs_f64()
        ),
        Health::SourceStuck { .. } => format!(
            "SOURCE STUCK: {}, watchdog pings stopped; {status_text}",
            stuck_source_reason(health, None).unwrap_or_default()
        ),
    }
}

/// Why a stuck source is stuck; `None` for any other health. It names the
/// camera the verdict names (one after the first), else `source` when given
/// (the first camera's: `Liveness::source_name`).
pub fn stuck_source_reason(health: &Health, source: Option<&str>) -> Option<String> {
    let Health::SourceStuck {
        in_a_row,
        still_stuck,
        for_,
        capture_silent,
        camera,
    } = health
    else {
        return None;
    };
    let source = camera
        .as_deref()
        .or(source)
        .map_or_else(|| "the source".to_string(), |s| format!("the source ({s})"));
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    Some(if *capture_silent {
        format!(
            "{source} is stuck: it is down and its capture thread has not looked after it for {:.0} s \
             (blocked in a driver call, or ended), so nothing rebuilds it",
            for_.as_secs_f64()
        )
    } else if *in_a_row >= MAX_ABANDONED_IN_A_ROW {
        format!(
            "{source} is stuck: {in_a_row} of its pipelines in a row did not stop when it was lost \
             (an element blocked in a read or a driver call; {still_stuck} still blocked)"
        )
    } else {
        format!(
            "{source} is stuck: {still_stuck} abandoned pipeline{} still blocked in an element and every \
             rebuild for {:.0} s failed to start (the device stays busy)",
            plural(*still_stuck),
            for_.as_secs_f64()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::liveness::record::Stage;
    use std::time::Duration;

    #[test]
    fn status_line_says_what_is_wrong() {
        let stalled = Health::Stalled {
            stage: Stage::Infer,
            for_: Duration::from_secs(7),
            in_flight: 3,
        };
        assert_eq!(
            status_line(&stalled, "29.8 fps"),
            "STALLED at infer for 7 s (3 frames in flight), watchdog pings stopped; 29.8 fps"
        );
        assert_eq!(
            status_line(&Health::Alive { in_flight: 2 }, "29.8 fps"),
            "29.8 fps"
        );
    }
}
