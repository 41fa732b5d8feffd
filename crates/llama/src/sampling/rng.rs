//! The random number machinery of libstdc++ that llama.cpp's samplers draw from: `std::mt19937`,
//! `std::generate_canonical` (behind `uniform_real_distribution`) and `std::discrete_distribution`.
//! Seeded runs only reproduce llama.cpp's tokens if every draw consumes the same engine outputs
//! and rounds the same way, so these follow libstdc++'s algorithms rather than any "equivalent".

const N: usize = 624;
const M: usize = 397;

/// The 32-bit Mersenne Twister with the parameters of `std::mt19937`.
#[derive(Clone)]
pub struct Mt19937 {
    state: Box<[u32; N]>,
    index: usize,
}

impl Mt19937 {
    pub fn new(seed: u32) -> Self {
        let mut rng = Mt19937 {
            state: Box::new([0; N]),
            index: N,
        };
        rng.seed(seed);
        rng
    }

    pub fn seed(&mut self, seed: u32) {
        self.state[0] = seed;
        for i in 1..N {
            let prev = self.state[i - 1];
            self.state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn twist(&mut self) {
        for i in 0..N {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % N] & 0x7fff_ffff);
            let mut v = self.state[(i + M) % N] ^ (y >> 1);
            if y & 1 != 0 {
                v ^= 0x9908_b0df;
            }
            self.state[i] = v;
        }
        self.index = 0;
    }

    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `std::uniform_real_distribution<double>(0, 1)`: generate_canonical<double, 53> takes two
    /// engine outputs, low word first.
    pub fn uniform_f64(&mut self) -> f64 {
        let lo = self.next_u32() as f64;
        let hi = self.next_u32() as f64;
        let sum = lo + hi * 4_294_967_296.0;
        let r = sum / 18_446_744_073_709_551_616.0;
        if r >= 1.0 {
            // nextafter(1.0, 0.0)
            f64::from_bits(1.0f64.to_bits() - 1)
        } else {
            r
        }
    }

    /// `std::uniform_real_distribution<float>(0, 1)`: one engine output, rounded to float before
    /// the division (so values near 2^32 round up to 1 and are clamped below it).
    pub fn uniform_f32(&mut self) -> f32 {
        let x = self.next_u32() as f32;
        let r = x / 4_294_967_296.0f32;
        if r >= 1.0 {
            f32::from_bits(1.0f32.to_bits() - 1)
        } else {
            r
        }
    }
}

/// `std::discrete_distribution<int>(probs)(rng)`: weights are widened to double, normalised by
/// their sum, accumulated, the last cumulative value forced to 1, and the index found by
/// `lower_bound` of one canonical double. With fewer than two weights it returns 0 without
/// drawing.
pub fn discrete_sample(probs: impl Iterator<Item = f32>, rng: &mut Mt19937) -> usize {
    let weights: Vec<f64> = probs.map(|p| p as f64).collect();
    if weights.len() < 2 {
        return 0;
    }
    let sum: f64 = weights.iter().fold(0.0, |acc, w| acc + w);
    let mut cumulative = Vec::with_capacity(weights.len());
    let mut acc = 0.0f64;
    for w in &weights {
        acc += w / sum;
        cumulative.push(acc);
    }
    let last = cumulative.len() - 1;
    cumulative[last] = 1.0;
    let p = rng.uniform_f64();
    // lower_bound: first element not less than p
    cumulative.partition_point(|&c| c < p)
}

/// A seed for `LLAMA_DEFAULT_SEED` (0xFFFFFFFF): llama.cpp asks std::random_device.
pub fn random_seed() -> u32 {
    use std::io::Read;
    let mut buf = [0u8; 4];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(&mut buf).is_ok() {
            return u32::from_le_bytes(buf);
        }
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    nanos as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_matches_the_standard_10000th_output() {
        // [rand.predef]: the 10000th consecutive invocation of a default-constructed mt19937
        // (seed 5489) produces 4123659995.
        let mut rng = Mt19937::new(5489);
        let mut last = 0;
        for _ in 0..10000 {
            last = rng.next_u32();
        }
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn mt19937_first_outputs_for_seed_5489() {
        let mut rng = Mt19937::new(5489);
        assert_eq!(rng.next_u32(), 3_499_211_612);
        assert_eq!(rng.next_u32(), 581_869_302);
        assert_eq!(rng.next_u32(), 3_890_346_734);
    }

    #[test]
    fn reseeding_restarts_the_sequence() {
        let mut a = Mt19937::new(42);
        let first: Vec<u32> = (0..5).map(|_| a.next_u32()).collect();
        a.seed(42);
        let again: Vec<u32> = (0..5).map(|_| a.next_u32()).collect();
        assert_eq!(first, again);
    }

    #[test]
    fn canonical_double_uses_two_words_low_first() {
        let mut a = Mt19937::new(5489);
        let lo = a.next_u32() as f64;
        let hi = a.next_u32() as f64;
        let want = (lo + hi * 4294967296.0) / 18446744073709551616.0;
        let mut b = Mt19937::new(5489);
        assert_eq!(b.uniform_f64(), want);
        // 3499211612 + 581869302 * 2^32, over 2^64
        assert!((want - 0.135477004).abs() < 1e-8, "{want}");
    }

    #[test]
    fn canonical_float_uses_one_word() {
        let mut b = Mt19937::new(5489);
        let r = b.uniform_f32();
        assert_eq!(r, 3_499_211_612u32 as f32 / 4294967296.0f32);
        assert_eq!(b.next_u32(), 581_869_302);
    }

    #[test]
    fn discrete_picks_by_cumulative_weight() {
        // first canonical double for seed 5489 is ~0.1355: with weights [0.1, 0.1, 0.8] the
        // cumulative values are [0.1, 0.2, 1.0], so index 1.
        let mut rng = Mt19937::new(5489);
        assert_eq!(discrete_sample([0.1f32, 0.1, 0.8].into_iter(), &mut rng), 1);
        // a single weight draws nothing
        let mut rng = Mt19937::new(5489);
        assert_eq!(discrete_sample([3.0f32].into_iter(), &mut rng), 0);
        assert_eq!(rng.next_u32(), 3_499_211_612);
    }
}
