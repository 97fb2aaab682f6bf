//! How often the event loop reads the record slots while the program runs.

use std::time::Duration;

use super::stub::RING_RECORDS;

pub(super) const IDLE_MIN: Duration = Duration::from_micros(100);
pub(super) const IDLE_MAX: Duration = Duration::from_millis(1);

/// The event loop's next sleep, after one of `slept` in which the fullest slot got `records`:
/// long enough that a slot fills to about a quarter of its ring between two reads, within
/// [`IDLE_MIN`, `IDLE_MAX`]. Each wake-up of the tool can preempt a program thread on its CPU
/// (on a busy machine the tool wakes where the program runs), and each preemption leaves
/// ~15 µs of the kernel's time in the strand it cuts (measured in a KVM guest): waking every
/// 100 µs while marks were hit put two such cuts in every 216 µs strand of `burn(4n)`.
pub(super) fn next_sleep(slept: Duration, records: u64) -> Duration {
    if records == 0 {
        return (slept * 2).min(IDLE_MAX);
    }
    let quarter = RING_RECORDS / 4;
    let fill = slept.as_secs_f64() * quarter as f64 / records as f64;
    Duration::from_secs_f64(fill).clamp(IDLE_MIN, IDLE_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_sleeps_until_a_quarter_of_a_ring_would_fill() {
        let ms = Duration::from_millis;
        // Idle: doubling up to the maximum.
        assert_eq!(next_sleep(IDLE_MIN, 0), IDLE_MIN * 2);
        assert_eq!(next_sleep(IDLE_MAX, 0), IDLE_MAX);
        // 16384 records (a quarter ring) per 1 ms: sleep 1 ms; 4x faster: 250 µs.
        assert_eq!(next_sleep(ms(1), RING_RECORDS / 4), ms(1));
        assert_eq!(next_sleep(ms(1), RING_RECORDS), Duration::from_micros(250));
        // A few hits (a coarse program): the longest sleep, not a wake-up per 100 µs.
        assert_eq!(next_sleep(IDLE_MIN, 4), IDLE_MAX);
        // Faster than a quarter ring per 100 µs: never below the minimum.
        assert_eq!(next_sleep(IDLE_MIN, 1 << 20), IDLE_MIN);
    }
}
