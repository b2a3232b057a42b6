/* INCRBYFLOAT's arithmetic as Redis does it: C's long double (80-bit
 * extended precision on x86-64), parsed with strtold and printed with
 * "%.17Lf". Rust has no long double type, so this one function is in C;
 * the trimming of the printed text and all validation stay in Rust
 * (src/long_double.rs). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Whether the NUL-terminated `s` (NUL-free, 1 to 5119 bytes: checked by the
 * caller) is a number by Redis's string2ld rules: the whole text parsed by
 * strtold, no leading space, no overflow or underflow to zero, not NaN.
 * Returns -1 when it is not, 1 when it is infinite ("inf" passes here and
 * fails later, as in Redis), 0 otherwise. */
int vireo_long_double_check(const char *s) {
    char *end;
    errno = 0;
    long double value = strtold(s, &end);
    if (isspace((unsigned char)s[0]) || end[0] != '\0' || errno == EINVAL || isnan(value))
        return -1;
    if (errno == ERANGE &&
        (value == HUGE_VAL || value == -HUGE_VAL || fpclassify(value) == FP_ZERO))
        return -1;
    return isinf(value) ? 1 : 0;
}

/* Adds the numbers spelled by the NUL-terminated strings `a` and `b` and
 * prints the sum with "%.17Lf" into `out` (`cap` bytes). Returns the
 * printed length, -1 when the sum is NaN or infinite, or -2 when it does
 * not fit in `out`. */
int vireo_long_double_add(const char *a, const char *b, char *out, int cap) {
    long double sum = strtold(a, NULL) + strtold(b, NULL);
    if (isnan(sum) || isinf(sum)) return -1;
    int len = snprintf(out, (size_t)cap, "%.17Lf", sum);
    if (len < 0 || len + 1 > cap) return -2;
    return len;
}
