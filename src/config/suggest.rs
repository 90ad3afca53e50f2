//! "Did you mean": the allowed name closest to a misspelt one, for the
//! messages about unknown keys, sections and values.

/// The name in `allowed` closest to `given` when it is close enough to be a
/// likely typo (`mqqt` → `mqtt`, `camera` → `cameras`); `None` otherwise.
pub fn closest<'a>(given: &str, allowed: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given_lower = given.to_ascii_lowercase();
    allowed
        .into_iter()
        .filter(|a| !a.is_empty() && *a != given)
        .map(|a| {
            let distance = strsim::damerau_levenshtein(&given_lower, &a.to_ascii_lowercase());
            (distance, a)
        })
        .filter(|(distance, a)| {
            // A third of the longer name, at least one edit and at most three.
            let limit = (given.chars().count().max(a.chars().count()) / 3).clamp(1, 3);
            *distance <= limit
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, a)| a)
}

#[cfg(test)]
mod tests {
    use super::closest;

    const SECTIONS: [&str; 6] = ["cameras", "mqtt", "modbus", "models", "source", "status"];

    #[test]
    fn a_typo_gets_the_name_it_was_meant_to_be() {
        assert_eq!(closest("mqqt", SECTIONS), Some("mqtt"));
        assert_eq!(closest("camera", SECTIONS), Some("cameras"));
        assert_eq!(closest("Source", SECTIONS), Some("source"));
    }

    #[test]
    fn a_name_far_from_every_allowed_one_gets_no_guess() {
        assert_eq!(closest("zz_template_probe", SECTIONS), None);
        assert_eq!(closest("gpu", SECTIONS), None);
    }
}
