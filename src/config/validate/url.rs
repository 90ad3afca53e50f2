//! The `[mqtt] url`: `mqtt://host[:port]` or `mqtts://host[:port]`, parsed
//! without ever repeating the URL in a message.

/// `mqtt://host[:port]` or `mqtts://host[:port]` to (tls, host, port). The
/// message never repeats the URL: one with a password in it must not reach a log.
///
/// Not rumqttc's `MqttOptions::parse_url` (issue 22 looked): it sits behind
/// rumqttc's `url` feature, which brings in 26 crates (url, idna and the ICU
/// tables), and it takes what this must refuse: `tcp://` and `ssl://`, a
/// user and password in the URL, a path (ignored), port 0; it wants
/// `?client_id=` in the URL, keeps the brackets of an IPv6 host, and says
/// "Unsupported URL scheme." where a technician needs what to write.
pub(super) fn parse_mqtt_url(url: &str) -> Result<(bool, String, u16), String> {
    let (tls, rest) = if let Some(rest) = url.strip_prefix("mqtt://") {
        (false, rest)
    } else if let Some(rest) = url.strip_prefix("mqtts://") {
        (true, rest)
    } else {
        return Err(
            "must start with mqtt:// or mqtts:// (e.g. \"mqtt://192.168.1.10:1883\")".into(),
        );
    };
    if rest.contains('@') {
        return Err("must not hold a user name or password: set `username`, and put the password in a file named by `password_file`".into());
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#']) {
        return Err("must be only mqtt://host:port (no path or query)".into());
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or("has an IPv6 address without its closing ]")?;
        (host, after.strip_prefix(':'))
    } else {
        match rest.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        }
    };
    if host.is_empty()
        || host.contains(|c: char| c.is_whitespace() || c == ':' && !rest.starts_with('['))
    {
        return Err("has no valid host name or address".into());
    }
    let port = match port {
        None => {
            if tls {
                8883
            } else {
                1883
            }
        }
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err("has a port that is not a number from 1 to 65535".into()),
        },
    };
    Ok((tls, host.to_string(), port))
}

#[cfg(test)]
mod mqtt_url_tests {
    use super::parse_mqtt_url;

    #[test]
    fn urls_with_and_without_port_and_tls() {
        assert_eq!(
            parse_mqtt_url("mqtt://broker.local").unwrap(),
            (false, "broker.local".into(), 1883)
        );
        assert_eq!(
            parse_mqtt_url("mqtts://10.0.0.2:8884").unwrap(),
            (true, "10.0.0.2".into(), 8884)
        );
        assert_eq!(
            parse_mqtt_url("mqtt://[::1]:1999").unwrap(),
            (false, "::1".into(), 1999)
        );
    }

    #[test]
    fn bad_urls_are_refused_without_repeating_them() {
        for bad in [
            "http://x",
            "mqtt://",
            "mqtt://h:0",
            "mqtt://h:port",
            "mqtt://h/x",
            "mqtt://u:secret@h",
        ] {
            let e = parse_mqtt_url(bad).unwrap_err();
            assert!(!e.contains("secret"), "{e}");
        }
    }
}
