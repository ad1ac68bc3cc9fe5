//! Round statistics: medians, ranges and the exact two-sided Mann-Whitney U
//! test the published WiredTiger comparison used.

/// Median of `xs` (the mean of the middle two for an even count).
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Smallest and largest of `xs`.
pub fn min_max(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// `U` of sample `a` against `b`: pairs where `a` is larger, ties counted
/// one half. Returned doubled so it stays an integer.
fn u2(a: &[f64], b: &[f64]) -> u64 {
    let mut u = 0;
    for &x in a {
        for &y in b {
            u += match x.partial_cmp(&y) {
                Some(std::cmp::Ordering::Greater) => 2,
                Some(std::cmp::Ordering::Equal) => 1,
                _ => 0,
            };
        }
    }
    u
}

/// The exact two-sided Mann-Whitney U p-value of `a` against `b`: the
/// probability, over every equally likely split of the pooled values into
/// groups of the two sizes, of a `U` at least as far from its mean as the
/// observed one.
///
/// Up to 2,000,000 splits the splits are enumerated, so ties are handled
/// exactly; above that the no-ties null distribution is counted by dynamic
/// programming (exact when there are no ties). With 5 against 5 the smallest
/// possible p is 2/252 = 0.0079.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return f64::NAN;
    }
    if binom(n1 + n2, n1) <= 2_000_000.0 {
        p_enumerated(a, b)
    } else {
        p_counted(a, b)
    }
}

/// The exact p-value by enumerating every split (exact with ties).
fn p_enumerated(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    let mean2 = (n1 * n2) as i64; // 2 * (n1 n2 / 2)
    let obs = (u2(a, b) as i64 - mean2).abs();
    let n = n1 + n2;
    {
        let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
        let mut idx: Vec<usize> = (0..n1).collect();
        let (mut hit, mut total) = (0u64, 0u64);
        let mut ga = Vec::with_capacity(n1);
        let mut gb = Vec::with_capacity(n2);
        loop {
            ga.clear();
            gb.clear();
            let mut k = 0;
            for (i, &x) in pooled.iter().enumerate() {
                if k < n1 && idx[k] == i {
                    ga.push(x);
                    k += 1;
                } else {
                    gb.push(x);
                }
            }
            if (u2(&ga, &gb) as i64 - mean2).abs() >= obs {
                hit += 1;
            }
            total += 1;
            // Next combination of n1 indices out of n, in lexicographic order.
            let mut i = n1;
            loop {
                if i == 0 {
                    return hit as f64 / total as f64;
                }
                i -= 1;
                if idx[i] != i + n - n1 {
                    break;
                }
            }
            idx[i] += 1;
            for j in i + 1..n1 {
                idx[j] = idx[j - 1] + 1;
            }
        }
    }
}

/// The exact no-ties p-value from the counted null distribution of `U`.
fn p_counted(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    let mean2 = (n1 * n2) as i64;
    let obs = (u2(a, b) as i64 - mean2).abs();
    // f[i][j][u]: arrangements of i a's and j b's with U = u (no ties).
    let umax = n1 * n2;
    let mut f = vec![vec![vec![0f64; umax + 1]; n2 + 1]; n1 + 1];
    for row in f[0].iter_mut() {
        row[0] = 1.0;
    }
    for i in 1..=n1 {
        f[i][0][0] = 1.0;
        for j in 1..=n2 {
            for u in 0..=i * j {
                // The largest value is an a (it beats all j b's) or a b.
                let from_a = if u >= j { f[i - 1][j][u - j] } else { 0.0 };
                let from_b = f[i][j - 1][u];
                f[i][j][u] = from_a + from_b;
            }
        }
    }
    let total: f64 = f[n1][n2].iter().sum();
    let hit: f64 = (0..=umax)
        .filter(|&u| ((2 * u) as i64 - mean2).abs() >= obs)
        .map(|u| f[n1][n2][u])
        .sum();
    hit / total
}

fn binom(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// In how many rounds `a[i] > b[i]` (same round, same run order pair).
pub fn rounds_won(a: &[f64], b: &[f64]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x > y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fully_separated_five_against_five_is_2_over_252() {
        let a = [10.0, 11.0, 12.0, 13.0, 14.0];
        let b = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert!((mann_whitney_p(&a, &b) - 2.0 / 252.0).abs() < 1e-12);
        assert!((mann_whitney_p(&b, &a) - 2.0 / 252.0).abs() < 1e-12);
    }

    #[test]
    fn identical_samples_give_p_one() {
        let a = [1.0, 2.0, 3.0];
        assert!((mann_whitney_p(&a, &a) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn dynamic_programming_matches_enumeration_without_ties() {
        // 3 vs 4, U = 1 of 12: enumerate by hand through both paths.
        let a = [1.0, 2.0, 5.0];
        let b = [3.0, 4.0, 6.0, 7.0];
        let p = mann_whitney_p(&a, &b);
        assert!((p - p_counted(&a, &b)).abs() < 1e-12);
        assert!((p - p_enumerated(&a, &b)).abs() < 1e-12);
        // Distribution of U for (3,4): counts for u=0..12 are
        // 1,1,2,3,4,4,5,4,4,3,2,1,1 (35 in all); observed U(a) = 2,
        // |2-6| = 4, so u <= 2 or u >= 10: 1+1+2+2+1+1 = 8.
        assert!((p - 8.0 / 35.0).abs() < 1e-12, "{p}");
    }

    #[test]
    fn medians_and_ranges() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(min_max(&[3.0, 1.0, 2.0]), (1.0, 3.0));
        assert_eq!(rounds_won(&[2.0, 1.0, 3.0], &[1.0, 2.0, 1.0]), 2);
    }
}
