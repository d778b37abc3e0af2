//! The two transcendental functions the scores are made of, `log2` and the logistic of the volume
//! z-score, read from small tables with linear interpolation instead of called from libm.
//!
//! Why: a score is a number in [0, 1] that is blended with others and compared with a threshold;
//! it needs five or six correct digits, not the 24 bits libm delivers at the price of a call and a
//! long dependency chain. Every event takes about seven `log2` and four logistic
//! evaluations (Markov rarity and step, the Half-Space Trees score, the content volume score, and
//! the pattern and volume scores of three UEBA observations), and on the per-event benchmark the
//! libm calls and the divisions around them were the longest chains left (see
//! `docs/benchmarks.md`, session 14). Series approximations with libm's full precision had been
//! tried twice and were slower than libm; a table lookup is a handful of integer operations and
//! two loads, with no division.
//!
//! Accuracy (tested against libm over dense grids): `log2` within 3e-6 absolute for every normal
//! positive float, plus the rounding of the f32 result (half a unit in its last place, 2e-6 for
//! results up to 32), and exact at powers of two; [`logistic4`] within 1.5e-5 absolute.

/// Intervals per octave of the `log2` table (indexed by the top mantissa bits).
const LOG2_BITS: u32 = 8;
const LOG2_STEPS: usize = 1 << LOG2_BITS;

/// `log2(1 + i / 256)` for `i` in `0..=256`: exact (0 and 1) at both ends, so the interpolated
/// function is continuous and increasing across octaves. Built at compile time, so a lookup has
/// no initialisation check in front of it.
static LOG2_TABLE: [f32; LOG2_STEPS + 1] = {
    let mut t = [0f32; LOG2_STEPS + 1];
    let mut i = 0;
    while i <= LOG2_STEPS {
        t[i] = (const_ln(1.0 + i as f64 / LOG2_STEPS as f64) / std::f64::consts::LN_2) as f32;
        i += 1;
    }
    t
};

/// `ln(x)` for `x` in [1, 2], at compile time: `2 atanh(u)` with `u = (x - 1) / (x + 1)` at most
/// 1/3, whose series has converged to f64 precision well within 40 terms.
const fn const_ln(x: f64) -> f64 {
    let u = (x - 1.0) / (x + 1.0);
    let u2 = u * u;
    let mut term = u;
    let mut sum = 0.0;
    let mut k = 0;
    while k < 40 {
        sum += term / (2 * k + 1) as f64;
        term *= u2;
        k += 1;
    }
    2.0 * sum
}

/// `exp(x)` for `|x|` up to about 20, at compile time: the Taylor series of `x / 256`, squared
/// eight times.
const fn const_exp(x: f64) -> f64 {
    let y = x / 256.0;
    let mut term = 1.0;
    let mut sum = 1.0;
    let mut k = 1;
    while k < 30 {
        term *= y / k as f64;
        sum += term;
        k += 1;
    }
    let mut i = 0;
    while i < 8 {
        sum *= sum;
        i += 1;
    }
    sum
}

/// `log2(x)` to within 3e-6 plus the rounding of the result. Zero, negative, subnormal, infinite
/// and NaN arguments (which no score produces) take libm's answer.
#[inline]
pub fn log2(value: f32) -> f32 {
    let bits = value.to_bits();
    if !(0x0080_0000..0x7f80_0000).contains(&bits) {
        return value.log2();
    }
    let exponent = (bits >> 23) as i32 - 127;
    let mantissa = bits & 0x007f_ffff;
    let i = (mantissa >> (23 - LOG2_BITS)) as usize;
    let low = mantissa & ((1 << (23 - LOG2_BITS)) - 1);
    let frac = low as f32 * (1.0 / (1u32 << (23 - LOG2_BITS)) as f32);
    let t = &LOG2_TABLE;
    let (a, b) = (t[i], t[i + 1]);
    exponent as f32 + (a + (b - a) * frac)
}

/// Range of the logistic table: below it the score is under 1.2e-7 and reads 0, above it over
/// 1 - 1.2e-7 and reads 1.
const LOGISTIC_LO: f32 = -12.0;
const LOGISTIC_HI: f32 = 20.0;
/// Table points per unit of z.
const LOGISTIC_PER_UNIT: f32 = 32.0;
const LOGISTIC_STEPS: usize = ((LOGISTIC_HI - LOGISTIC_LO) * LOGISTIC_PER_UNIT) as usize;

/// `1 / (1 + exp(4 - z))` at `z = LOGISTIC_LO + i / 32`, built at compile time, with the ends
/// exactly 0 and 1. A saturated score must be exactly 1: one sub-score at its full weight is
/// what reaches the UEBA alert floor ([`crate::ueba::MIN_ALERT_SCORE`]), and 1 - 1e-7 of it
/// does not.
static LOGISTIC_TABLE: [f32; LOGISTIC_STEPS + 1] = {
    let mut t = [0f32; LOGISTIC_STEPS + 1];
    let mut i = 1;
    while i < LOGISTIC_STEPS {
        let z = LOGISTIC_LO as f64 + i as f64 / LOGISTIC_PER_UNIT as f64;
        t[i] = (1.0 / (1.0 + const_exp(4.0 - z))) as f32;
        i += 1;
    }
    t[LOGISTIC_STEPS] = 1.0;
    t
};

/// `1 / (1 + exp(4 - z))`, the logistic centred on z = 4, to within 1.5e-5; exactly 0 for z
/// at or below -12 and exactly 1 at or above 20; NaN reads 0 (no deviation).
#[inline]
pub fn logistic4(value: f32) -> f64 {
    let u = ((value - LOGISTIC_LO) * LOGISTIC_PER_UNIT)
        .max(0.0)
        .min(LOGISTIC_STEPS as f32);
    // `u` is in [0, LOGISTIC_STEPS] by now (`max` drops a NaN for its other operand); the top
    // point interpolates the last interval at its end.
    let i = (u as usize).min(LOGISTIC_STEPS - 1);
    let frac = u - i as f32;
    let t = &LOGISTIC_TABLE;
    let (a, b) = (t[i], t[i + 1]);
    f64::from(a + (b - a) * frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_is_within_three_millionths_of_libm() {
        let mut worst = 0f64;
        // Every 97th float from 2^-40 to 2^40: all mantissa positions in many octaves.
        let mut bits = (2f32).powi(-40).to_bits();
        while bits < (2f32).powi(40).to_bits() {
            let x = f32::from_bits(bits);
            let exact = f64::from(x).log2();
            let y = log2(x);
            let half_ulp = f64::from(f32::from_bits(y.abs().to_bits() + 1) - y.abs()) / 2.0;
            let err = (f64::from(y) - exact).abs() - half_ulp;
            worst = worst.max(err);
            bits += 97;
        }
        assert!(worst < 3e-6, "worst error past the rounding {worst}");
    }

    #[test]
    fn compile_time_tables_match_libm() {
        for (i, &v) in LOG2_TABLE.iter().enumerate() {
            let exact = (1.0 + i as f64 / LOG2_STEPS as f64).log2();
            assert!((f64::from(v) - exact).abs() < 1e-7, "log2 entry {i}");
        }
        assert_eq!((LOG2_TABLE[0], LOG2_TABLE[LOG2_STEPS]), (0.0, 1.0));
        for (i, &v) in LOGISTIC_TABLE.iter().enumerate() {
            let z = f64::from(LOGISTIC_LO) + i as f64 / f64::from(LOGISTIC_PER_UNIT);
            let exact = 1.0 / (1.0 + (4.0 - z).exp());
            // The ends are set to 0 and 1, within 1.2e-7 of the formula.
            assert!((f64::from(v) - exact).abs() < 1.2e-7, "logistic entry {i}");
        }
        assert_eq!(LOGISTIC_TABLE[0], 0.0);
        assert_eq!(LOGISTIC_TABLE[LOGISTIC_STEPS], 1.0);
    }

    #[test]
    fn log2_is_exact_at_powers_of_two_and_increasing() {
        for e in -126..128 {
            let x = 2f32.powi(e);
            assert_eq!(log2(x), e as f32, "2^{e}");
        }
        let mut prev = f32::NEG_INFINITY;
        let mut x = 0.5f32;
        while x < 8.0 {
            let y = log2(x);
            assert!(y >= prev, "{x}");
            prev = y;
            x = f32::from_bits(x.to_bits() + 1);
        }
    }

    #[test]
    fn log2_of_odd_arguments_is_libms() {
        assert_eq!(log2(0.0), f32::NEG_INFINITY);
        assert!(log2(-1.0).is_nan());
        assert!(log2(f32::NAN).is_nan());
        assert_eq!(log2(f32::INFINITY), f32::INFINITY);
        let tiny = f32::from_bits(1);
        assert_eq!(log2(tiny), tiny.log2());
    }

    #[test]
    fn logistic_is_within_fifteen_millionths_of_the_formula() {
        let mut worst = 0f64;
        for i in -40_000..40_000 {
            let z = i as f32 / 1000.0;
            let exact = 1.0 / (1.0 + (4.0 - f64::from(z)).exp());
            worst = worst.max((logistic4(z) - exact).abs());
        }
        assert!(worst < 1.5e-5, "worst error {worst}");
        assert!((logistic4(4.0) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn logistic_of_odd_arguments_stays_in_range() {
        assert_eq!(logistic4(f32::NEG_INFINITY), 0.0);
        assert_eq!(logistic4(-12.0), 0.0);
        assert_eq!(logistic4(f32::NAN), 0.0);
        // Saturation is exactly 1, so one sub-score at its full weight reaches the alert floor.
        assert_eq!(logistic4(20.0), 1.0);
        assert_eq!(logistic4(57.0), 1.0);
        assert_eq!(logistic4(f32::INFINITY), 1.0);
        let mut prev = 0.0;
        for i in -13_000..21_000 {
            let v = logistic4(i as f32 / 1000.0);
            assert!(v >= prev, "increasing at {i}");
            prev = v;
        }
    }
}
