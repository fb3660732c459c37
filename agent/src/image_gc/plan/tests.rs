#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

const GIB: u64 = 1 << 30;

fn image(name: &str, size: u64, in_use: bool) -> ListedImage {
    ListedImage {
        name: name.into(),
        size,
        in_use,
    }
}

/// Seen at `first` and last used at `used`, in seconds before `now`.
fn seen_at(now: Instant, entries: &[(&str, u64, u64)]) -> HashMap<String, Seen> {
    entries
        .iter()
        .map(|(n, first, used)| {
            let at = |s: u64| now - Duration::from_secs(s);
            (
                n.to_string(),
                Seen {
                    first: at(*first),
                    last_used: at(*used),
                },
            )
        })
        .collect()
}

#[test]
fn below_the_high_threshold_nothing_goes() {
    let now = Instant::now();
    let images = [image("a", GIB, false)];
    let seen = seen_at(now, &[("a", 600, 600)]);
    // 84 % used.
    let plan = plan(
        &GcSettings::default(),
        (100 * GIB, 16 * GIB),
        &images,
        &seen,
        now,
    );
    assert_eq!(plan, GcPlan::default());
}

#[test]
fn frees_down_to_the_low_threshold_least_recently_used_first() {
    let now = Instant::now();
    let images = [
        image("recent", 3 * GIB, false),
        image("old", 3 * GIB, false),
        image("running", 10 * GIB, true),
        image("older", 2 * GIB, false),
    ];
    let seen = seen_at(
        now,
        &[
            ("recent", 900, 300),
            ("old", 900, 600),
            ("running", 900, 0),
            ("older", 900, 800),
        ],
    );
    // 86 % used: free 6 GiB to reach 80 %.
    let plan = plan(
        &GcSettings::default(),
        (100 * GIB, 14 * GIB),
        &images,
        &seen,
        now,
    );
    assert_eq!(plan.remove, ["older", "old", "recent"]);
    assert_eq!((plan.wanted, plan.freed), (6 * GIB, 8 * GIB));
    assert!(!plan.short());
}

#[test]
fn young_and_used_images_stay_and_a_shortfall_is_reported() {
    let now = Instant::now();
    let images = [image("young", GIB, false), image("used", GIB, true)];
    let seen = seen_at(now, &[("young", 60, 60), ("used", 900, 0)]);
    let plan = plan(
        &GcSettings::default(),
        (100 * GIB, 10 * GIB),
        &images,
        &seen,
        now,
    );
    assert!(plan.remove.is_empty());
    assert!(plan.short());
}

#[test]
fn a_high_threshold_of_100_turns_it_off() {
    let now = Instant::now();
    let settings = GcSettings {
        high_percent: 100,
        ..GcSettings::default()
    };
    let images = [image("a", GIB, false)];
    let seen = seen_at(now, &[("a", 900, 900)]);
    assert_eq!(
        plan(&settings, (GIB, 0), &images, &seen, now),
        GcPlan::default()
    );
}

#[test]
fn remembering_marks_use_and_forgets_removed_images() {
    let t0 = Instant::now();
    let mut seen = HashMap::new();
    remember(&mut seen, &[image("a", 1, false), image("b", 1, true)], t0);
    let t1 = t0 + Duration::from_secs(10);
    remember(&mut seen, &[image("a", 1, true)], t1);
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen["a"],
        Seen {
            first: t0,
            last_used: t1
        }
    );
}
