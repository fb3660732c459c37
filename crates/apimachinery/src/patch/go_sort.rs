//! Go's `sort.Stable`, so merged lists come out in the order upstream gives them.

/// `sort.SliceStable` from Go, ported exactly (insertion sort in blocks of 20,
/// then SymMerge), so that Kubernetes' inconsistent comparators give the same
/// order here as there.
pub(super) fn go_stable_sort<T>(data: &mut [T], less: &dyn Fn(&T, &T) -> bool) {
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        go_insertion_sort(data, a, b, less);
        a = b;
        b += block;
    }
    go_insertion_sort(data, a, n, less);
    while block < n {
        a = 0;
        b = 2 * block;
        while b <= n {
            go_sym_merge(data, a, a + block, b, less);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            go_sym_merge(data, a, m, n, less);
        }
        block *= 2;
    }
}

pub(super) fn go_less<T>(data: &[T], i: usize, j: usize, less: &dyn Fn(&T, &T) -> bool) -> bool {
    match (data.get(i), data.get(j)) {
        (Some(x), Some(y)) => less(x, y),
        _ => false,
    }
}

pub(super) fn go_insertion_sort<T>(
    data: &mut [T],
    a: usize,
    b: usize,
    less: &dyn Fn(&T, &T) -> bool,
) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && go_less(data, j, j - 1, less) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

pub(super) fn go_sym_merge<T>(
    data: &mut [T],
    a: usize,
    m: usize,
    b: usize,
    less: &dyn Fn(&T, &T) -> bool,
) {
    if m <= a || b <= m || b > data.len() {
        return;
    }
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if go_less(data, h, a, less) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i - 1 {
            data.swap(k, k + 1);
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !go_less(data, m, h, less) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !go_less(data, p - c, c, less) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        if let Some(s) = data.get_mut(start..end) {
            s.rotate_left(m - start);
        }
    }
    if a < start && start < mid {
        go_sym_merge(data, a, start, mid, less);
    }
    if mid < end && end < b {
        go_sym_merge(data, mid, end, b, less);
    }
}
