/*
 * memspec_backend.c - a native (C11, libc + POSIX) memory backend for memspec.
 *
 * Speaks memspec's JSON Lines protocol on stdin/stdout, one process per session.
 * Written from the documents alone (README, quickstart, backend-authors, SPEC.md, CONTRACT.md).
 *
 * Claims: core, batch, patch, drift-guard, multi-process, crash-safe, durable.
 *
 * Build: cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -o memspec_backend memspec_backend.c
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define BACKEND_NAME "memspec-native-c"
#define BACKEND_VERSION "1.0"

/* ------------------------------------------------------------------ */
/* growable byte buffer                                                */

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static void die_oom(void) {
    fputs("memspec_backend: out of memory\n", stderr);
    exit(70);
}

static void buf_reserve(Buf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return;
    size_t c = b->cap ? b->cap : 64;
    while (c < b->n + extra + 1) c *= 2;
    char *q = realloc(b->p, c);
    if (!q) die_oom();
    b->p = q;
    b->cap = c;
}

static void buf_add(Buf *b, const void *s, size_t n) {
    buf_reserve(b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void buf_addc(Buf *b, char c) { buf_add(b, &c, 1); }
static void buf_adds(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static void buf_addf(Buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k >= sizeof tmp) k = (int)sizeof tmp - 1;
    buf_add(b, tmp, (size_t)k);
}

static void buf_free(Buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

static char *xstrdup(const char *s) {
    char *r = strdup(s);
    if (!r) die_oom();
    return r;
}

/* ------------------------------------------------------------------ */
/* list of byte strings (entries)                                      */

typedef struct {
    char *p;
    size_t n;
} Str;

typedef struct {
    Str *v;
    size_t n, cap;
} StrList;

static void sl_push(StrList *l, const char *p, size_t n) {
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 8;
        Str *q = realloc(l->v, c * sizeof *q);
        if (!q) die_oom();
        l->v = q;
        l->cap = c;
    }
    char *s = malloc(n + 1);
    if (!s) die_oom();
    if (n) memcpy(s, p, n);
    s[n] = 0;
    l->v[l->n].p = s;
    l->v[l->n].n = n;
    l->n++;
}

static void sl_free(StrList *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].p);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static void sl_copy(StrList *dst, const StrList *src) {
    sl_free(dst);
    for (size_t i = 0; i < src->n; i++) sl_push(dst, src->v[i].p, src->v[i].n);
}

static bool str_eq(const char *a, size_t an, const char *b, size_t bn) {
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static void sl_join(const StrList *l, Buf *out) {
    for (size_t i = 0; i < l->n; i++) {
        if (i) buf_add(out, "\n\xC2\xA7\n", 4);
        buf_add(out, l->v[i].p, l->v[i].n);
    }
    buf_reserve(out, 0);
}

/* ------------------------------------------------------------------ */
/* SHA-256                                                             */

typedef struct {
    uint32_t h[8];
    uint64_t len;
    unsigned char blk[64];
    size_t bn;
} Sha256;

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(Sha256 *s, const unsigned char *b) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 |
               (uint32_t)b[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], bb = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5],
             g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = h + S1 + ch + K256[i] + w[i];
        uint32_t S0 = ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22);
        uint32_t mj = (a & bb) ^ (a & c) ^ (bb & c);
        uint32_t t2 = S0 + mj;
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = bb;
        bb = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += bb;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

static void sha256_hex(const void *data, size_t n, char out[65]) {
    Sha256 s = {{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
                 0x5be0cd19},
                0,
                {0},
                0};
    const unsigned char *p = data;
    s.len = (uint64_t)n * 8;
    while (n >= 64) {
        sha_block(&s, p);
        p += 64;
        n -= 64;
    }
    unsigned char last[128];
    memset(last, 0, sizeof last);
    if (n) memcpy(last, p, n);
    last[n] = 0x80;
    size_t total = (n + 9 <= 64) ? 64 : 128;
    for (int i = 0; i < 8; i++) last[total - 1 - i] = (unsigned char)(s.len >> (8 * i));
    sha_block(&s, last);
    if (total == 128) sha_block(&s, last + 64);
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) {
            unsigned v = (s.h[i] >> (24 - 8 * j)) & 0xff;
            out[8 * i + 2 * j] = hx[v >> 4];
            out[8 * i + 2 * j + 1] = hx[v & 15];
        }
    out[64] = 0;
}

/* ------------------------------------------------------------------ */
/* UTF-8 and Unicode helpers                                           */

static void utf8_put(Buf *b, uint32_t cp) {
    char t[4];
    size_t n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) { /* surrogates too: generalised UTF-8, never valid text */
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    buf_add(b, t, n);
}

/* Lenient decoder for our own (valid or generalised) UTF-8: returns the code point and
 * sets *len to the number of bytes used (at least 1). */
static uint32_t utf8_get(const char *s, size_t n, size_t *len) {
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    size_t need;
    uint32_t cp;
    if (c < 0x80) {
        *len = 1;
        return c;
    } else if ((c & 0xE0) == 0xC0) {
        need = 1;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        need = 2;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        need = 3;
        cp = c & 0x07;
    } else {
        *len = 1;
        return 0xFFFD;
    }
    if (need >= n) {
        *len = 1;
        return 0xFFFD;
    }
    for (size_t i = 1; i <= need; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            *len = 1;
            return 0xFFFD;
        }
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    *len = need + 1;
    return cp;
}

/* Strict RFC 3629 validation. */
static bool utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return false;
        }
        if (i + need >= n) return false; /* cut-off sequence */
        if (p[i + 1] < lo || p[i + 1] > hi) return false;
        for (size_t k = 2; k <= need; k++)
            if ((p[i + k] & 0xC0) != 0x80) return false;
        i += need + 1;
    }
    return true;
}

static size_t cp_count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) k++;
    return k;
}

/* Unicode White_Space: the 25 code points of ENTRY-1. */
static bool is_ws(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Strip White_Space from both ends of s[*a, *b); at the start also U+FEFF when lead_bom. */
static void strip_range(const char *s, size_t *a, size_t *b, bool lead_bom) {
    while (*a < *b) {
        size_t len;
        uint32_t c = utf8_get(s + *a, *b - *a, &len);
        if (is_ws(c) || (lead_bom && c == 0xFEFF))
            *a += len;
        else
            break;
    }
    while (*b > *a) {
        size_t k = *b - 1;
        while (k > *a && ((unsigned char)s[k] & 0xC0) == 0x80 && *b - k < 4) k--;
        size_t len;
        uint32_t c = utf8_get(s + k, *b - k, &len);
        if (k + len == *b && is_ws(c))
            *b = k;
        else
            break;
    }
}

static bool is_delim_line(const char *s, size_t n) {
    size_t a = 0, b = n;
    strip_range(s, &a, &b, false);
    return b - a == 2 && (unsigned char)s[a] == 0xC2 && (unsigned char)s[a + 1] == 0xA7;
}

/* CR LF and lone CR become LF. */
static void nl_normalise(const char *s, size_t n, Buf *out) {
    buf_reserve(out, n);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\r') {
            buf_addc(out, '\n');
            if (i + 1 < n && s[i + 1] == '\n') i++;
        } else {
            buf_addc(out, s[i]);
        }
    }
    buf_reserve(out, 0);
}

/* ENTRY-1: normalise content / old_text into out. */
static void normalise(const char *s, size_t n, Buf *out) {
    Buf t = {0};
    nl_normalise(s, n, &t);
    size_t a = 0, b = t.n;
    strip_range(t.p, &a, &b, false);
    buf_add(out, t.p + a, b - a);
    buf_free(&t);
}

static bool has_delim_line(const char *s, size_t n) {
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '\n') {
            if (is_delim_line(s + start, i - start)) return true;
            start = i + 1;
        }
    }
    return false;
}

static bool has_lone_surrogate(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)s[i] == 0xED && (unsigned char)s[i + 1] >= 0xA0 &&
            (unsigned char)s[i + 1] <= 0xBF)
            return true;
    return false;
}

static bool starts_with_bom(const char *s, size_t n) {
    return n >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB &&
           (unsigned char)s[2] == 0xBF;
}

/* READ-1 to READ-5: parse valid UTF-8 file bytes into entries. */
static void parse_entries(const char *bytes, size_t n, StrList *out) {
    if (starts_with_bom(bytes, n)) {
        bytes += 3;
        n -= 3;
    }
    Buf t = {0};
    nl_normalise(bytes, n, &t);
    size_t piece_start = 0, line_start = 0;
    for (size_t i = 0; i <= t.n; i++) {
        if (i == t.n || t.p[i] == '\n') {
            bool delim = is_delim_line(t.p + line_start, i - line_start);
            if (delim || i == t.n) {
                size_t a = piece_start, b = delim ? line_start : i;
                strip_range(t.p, &a, &b, true);
                if (b > a) sl_push(out, t.p + a, b - a);
                piece_start = i + 1;
            }
            line_start = i + 1;
        }
    }
    buf_free(&t);
}

static size_t usage_of(const StrList *l) {
    size_t u = 0;
    for (size_t i = 0; i < l->n; i++) u += cp_count(l->v[i].p, l->v[i].n) + (i ? 3 : 0);
    return u;
}

static void fmt_group(Buf *b, unsigned long long v) {
    char d[32];
    int k = snprintf(d, sizeof d, "%llu", v);
    for (int i = 0; i < k; i++) {
        if (i && (k - i) % 3 == 0) buf_addc(b, ',');
        buf_addc(b, d[i]);
    }
}

static void usage_label(Buf *b, size_t used, long long limit) {
    unsigned long long u = used, l = (unsigned long long)limit;
    unsigned long long pct = l ? (u >= l ? 100 : (u * 100 / l)) : 100;
    if (pct > 100) pct = 100;
    buf_addf(b, "%llu%% \xE2\x80\x94 ", pct);
    fmt_group(b, u);
    buf_addc(b, '/');
    fmt_group(b, l);
    buf_adds(b, " chars");
}

/* ------------------------------------------------------------------ */
/* JSON                                                                 */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct JVal JVal;
struct JVal {
    int t;
    bool b;
    char *s; /* string bytes (may hold NUL) or number text */
    size_t n;
    JVal **items;
    Str *keys;
    size_t count;
};

typedef struct {
    const char *p;
    size_t n, i;
    int depth;
} JP;

static void jfree(JVal *v) {
    if (!v) return;
    free(v->s);
    for (size_t i = 0; i < v->count; i++) {
        jfree(v->items[i]);
        if (v->keys) free(v->keys[i].p);
    }
    free(v->items);
    free(v->keys);
    free(v);
}

static void jp_ws(JP *j) {
    while (j->i < j->n && (j->p[j->i] == ' ' || j->p[j->i] == '\t' || j->p[j->i] == '\n' ||
                           j->p[j->i] == '\r'))
        j->i++;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool jp_hex4(JP *j, uint32_t *out) {
    if (j->i + 4 > j->n) return false;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(j->p[j->i + (size_t)k]);
        if (h < 0) return false;
        v = v * 16 + (uint32_t)h;
    }
    j->i += 4;
    *out = v;
    return true;
}

static bool jp_string(JP *j, Buf *out) {
    if (j->i >= j->n || j->p[j->i] != '"') return false;
    j->i++;
    while (j->i < j->n) {
        unsigned char c = (unsigned char)j->p[j->i];
        if (c == '"') {
            j->i++;
            buf_reserve(out, 0);
            return true;
        }
        if (c == '\\') {
            j->i++;
            if (j->i >= j->n) return false;
            char e = j->p[j->i++];
            switch (e) {
            case '"': buf_addc(out, '"'); break;
            case '\\': buf_addc(out, '\\'); break;
            case '/': buf_addc(out, '/'); break;
            case 'b': buf_addc(out, '\b'); break;
            case 'f': buf_addc(out, '\f'); break;
            case 'n': buf_addc(out, '\n'); break;
            case 'r': buf_addc(out, '\r'); break;
            case 't': buf_addc(out, '\t'); break;
            case 'u': {
                uint32_t cp;
                if (!jp_hex4(j, &cp)) return false;
                if (cp >= 0xD800 && cp <= 0xDBFF && j->i + 6 <= j->n && j->p[j->i] == '\\' &&
                    j->p[j->i + 1] == 'u') {
                    size_t save = j->i;
                    uint32_t lo;
                    j->i += 2;
                    if (jp_hex4(j, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    else
                        j->i = save; /* a lone high surrogate; the next escape stands alone */
                }
                utf8_put(out, cp); /* a lone surrogate becomes ED A0..BF xx: never valid text */
                break;
            }
            default: return false;
            }
            continue;
        }
        buf_addc(out, (char)c);
        j->i++;
    }
    return false;
}

static JVal *jnew(int t) {
    JVal *v = calloc(1, sizeof *v);
    if (!v) die_oom();
    v->t = t;
    return v;
}

static void jpush(JVal *v, JVal *item, Str *key) {
    if ((v->count & (v->count - 1)) == 0) { /* grow at powers of two */
        size_t c = v->count ? v->count * 2 : 1;
        JVal **ni = realloc(v->items, c * sizeof *ni);
        if (!ni) die_oom();
        v->items = ni;
        if (key) {
            Str *nk = realloc(v->keys, c * sizeof *nk);
            if (!nk) die_oom();
            v->keys = nk;
        }
    }
    v->items[v->count] = item;
    if (key) v->keys[v->count] = *key;
    v->count++;
}

static JVal *jp_value(JP *j) {
    jp_ws(j);
    if (j->i >= j->n || j->depth > 400) return NULL;
    char c = j->p[j->i];
    if (c == '"') {
        Buf b = {0};
        buf_reserve(&b, 0);
        if (!jp_string(j, &b)) {
            buf_free(&b);
            return NULL;
        }
        JVal *v = jnew(J_STR);
        v->s = b.p;
        v->n = b.n;
        return v;
    }
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        JVal *v = jnew(obj ? J_OBJ : J_ARR);
        j->i++;
        j->depth++;
        jp_ws(j);
        if (j->i < j->n && j->p[j->i] == (obj ? '}' : ']')) {
            j->i++;
            j->depth--;
            return v;
        }
        for (;;) {
            Str key = {0};
            if (obj) {
                jp_ws(j);
                Buf kb = {0};
                buf_reserve(&kb, 0);
                if (!jp_string(j, &kb)) {
                    buf_free(&kb);
                    jfree(v);
                    return NULL;
                }
                key.p = kb.p;
                key.n = kb.n;
                jp_ws(j);
                if (j->i >= j->n || j->p[j->i] != ':') {
                    free(key.p);
                    jfree(v);
                    return NULL;
                }
                j->i++;
            }
            JVal *item = jp_value(j);
            if (!item) {
                free(key.p);
                jfree(v);
                return NULL;
            }
            jpush(v, item, obj ? &key : NULL);
            jp_ws(j);
            if (j->i < j->n && j->p[j->i] == ',') {
                j->i++;
                continue;
            }
            if (j->i < j->n && j->p[j->i] == (obj ? '}' : ']')) {
                j->i++;
                j->depth--;
                return v;
            }
            jfree(v);
            return NULL;
        }
    }
    if (j->n - j->i >= 4 && memcmp(j->p + j->i, "null", 4) == 0) {
        j->i += 4;
        return jnew(J_NULL);
    }
    if (j->n - j->i >= 4 && memcmp(j->p + j->i, "true", 4) == 0) {
        j->i += 4;
        JVal *v = jnew(J_BOOL);
        v->b = true;
        return v;
    }
    if (j->n - j->i >= 5 && memcmp(j->p + j->i, "false", 5) == 0) {
        j->i += 5;
        return jnew(J_BOOL);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t s = j->i;
        if (j->p[j->i] == '-') j->i++;
        size_t d0 = j->i;
        while (j->i < j->n && j->p[j->i] >= '0' && j->p[j->i] <= '9') j->i++;
        if (j->i == d0) return NULL;
        bool integer = true;
        if (j->i < j->n && j->p[j->i] == '.') {
            integer = false;
            j->i++;
            size_t f0 = j->i;
            while (j->i < j->n && j->p[j->i] >= '0' && j->p[j->i] <= '9') j->i++;
            if (j->i == f0) return NULL;
        }
        if (j->i < j->n && (j->p[j->i] == 'e' || j->p[j->i] == 'E')) {
            integer = false;
            j->i++;
            if (j->i < j->n && (j->p[j->i] == '+' || j->p[j->i] == '-')) j->i++;
            size_t e0 = j->i;
            while (j->i < j->n && j->p[j->i] >= '0' && j->p[j->i] <= '9') j->i++;
            if (j->i == e0) return NULL;
        }
        JVal *v = jnew(J_NUM);
        v->b = integer;
        v->n = j->i - s;
        v->s = malloc(v->n + 1);
        if (!v->s) die_oom();
        memcpy(v->s, j->p + s, v->n);
        v->s[v->n] = 0;
        return v;
    }
    return NULL;
}

static JVal *jparse(const char *p, size_t n) {
    JP j = {p, n, 0, 0};
    JVal *v = jp_value(&j);
    if (!v) return NULL;
    jp_ws(&j);
    if (j.i != j.n) {
        jfree(v);
        return NULL;
    }
    return v;
}

static JVal *jget(const JVal *o, const char *key) {
    if (!o || o->t != J_OBJ) return NULL;
    size_t kn = strlen(key);
    JVal *found = NULL;
    for (size_t i = 0; i < o->count; i++)
        if (str_eq(o->keys[i].p, o->keys[i].n, key, kn)) found = o->items[i]; /* last wins */
    return found;
}

static void json_str(Buf *b, const char *s, size_t n) {
    buf_addc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': buf_add(b, "\\\"", 2); break;
        case '\\': buf_add(b, "\\\\", 2); break;
        case '\n': buf_add(b, "\\n", 2); break;
        case '\r': buf_add(b, "\\r", 2); break;
        case '\t': buf_add(b, "\\t", 2); break;
        case '\b': buf_add(b, "\\b", 2); break;
        case '\f': buf_add(b, "\\f", 2); break;
        default:
            if (c < 0x20 || c == 0x7F) {
                buf_addf(b, "\\u%04x", c);
            } else if (c < 0x80) {
                buf_addc(b, (char)c);
            } else {
                /* non-ASCII: written as \u escapes, so the line is ASCII whatever we hold */
                size_t len;
                uint32_t cp = utf8_get(s + i, n - i, &len);
                if (cp >= 0x10000) {
                    uint32_t v = cp - 0x10000;
                    buf_addf(b, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                } else {
                    buf_addf(b, "\\u%04x", cp);
                }
                i += len - 1;
            }
        }
    }
    buf_addc(b, '"');
}

static void json_cstr(Buf *b, const char *s) { json_str(b, s, strlen(s)); }

/* ------------------------------------------------------------------ */
/* the store                                                            */

typedef struct {
    const char *file;  /* MEMORY.md */
    const char *title; /* MEMORY (your personal notes) */
    long long limit;
    StrList live;
    bool snap_null;
    Buf snap;
} Target;

static Target T[2] = {
    {"MEMORY.md", "MEMORY (your personal notes)", 2200, {0}, true, {0}},
    {"USER.md", "USER PROFILE (who the user is)", 1375, {0}, true, {0}},
};
static int g_dirfd = -1;
static char *g_root = NULL;
static unsigned g_counter = 0;

enum { FS_ABSENT, FS_OK, FS_UNREADABLE };

typedef struct {
    int state;
    char *bytes;
    size_t n;
    mode_t mode;
    int err;
} FileRead;

static void fr_free(FileRead *f) {
    free(f->bytes);
    f->bytes = NULL;
    f->n = 0;
}

static bool read_fd_all(int fd, Buf *out) {
    char tmp[65536];
    for (;;) {
        ssize_t k = read(fd, tmp, sizeof tmp);
        if (k < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (k == 0) return true;
        buf_add(out, tmp, (size_t)k);
    }
}

/* Read a data file (following a symbolic link: FILES-4). */
static void read_target(const Target *t, FileRead *fr) {
    memset(fr, 0, sizeof *fr);
    int fd;
    do fd = openat(g_dirfd, t->file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        fr->err = errno;
        fr->state = errno == ENOENT ? FS_ABSENT : FS_UNREADABLE;
        return;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fr->err = errno;
        fr->state = FS_UNREADABLE;
        close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        fr->err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        fr->state = FS_UNREADABLE;
        close(fd);
        return;
    }
    fr->mode = st.st_mode;
    Buf b = {0};
    buf_reserve(&b, (size_t)(st.st_size > 0 ? st.st_size : 0));
    bool ok = read_fd_all(fd, &b);
    int e = errno;
    close(fd);
    if (!ok) {
        fr->err = e;
        fr->state = FS_UNREADABLE;
        buf_free(&b);
        return;
    }
    if (!utf8_valid(b.p, b.n)) {
        fr->err = EILSEQ;
        fr->state = FS_UNREADABLE;
        buf_free(&b);
        return;
    }
    fr->state = FS_OK;
    fr->bytes = b.p;
    fr->n = b.n;
}

static const char BAR[] =
    "\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90"
    "\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90"
    "\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90"
    "\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90"
    "\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90"
    "\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90\xE2\x95\x90"; /* 46 x U+2550 */

static void do_load(void) {
    for (int i = 0; i < 2; i++) {
        Target *t = &T[i];
        FileRead fr;
        read_target(t, &fr);
        buf_free(&t->snap);
        t->snap_null = true;
        if (fr.state == FS_UNREADABLE) {
            /* READ-8: live entries stay what this session last read; SNAP-9: a block */
            t->snap_null = false;
            buf_adds(&t->snap, BAR);
            buf_addc(&t->snap, '\n');
            buf_adds(&t->snap, t->title);
            buf_adds(&t->snap, " [unreadable]\n");
            buf_adds(&t->snap, BAR);
            buf_adds(&t->snap, "\n[UNREADABLE: ");
            buf_adds(&t->snap, t->file);
            buf_adds(&t->snap, " could not be read or decoded; writes are refused until it is "
                               "repaired]");
        } else {
            StrList l = {0};
            if (fr.state == FS_OK) parse_entries(fr.bytes, fr.n, &l);
            sl_copy(&t->live, &l);
            if (l.n) {
                t->snap_null = false;
                buf_adds(&t->snap, BAR);
                buf_addc(&t->snap, '\n');
                buf_adds(&t->snap, t->title);
                buf_adds(&t->snap, " [");
                usage_label(&t->snap, usage_of(&l), t->limit);
                buf_adds(&t->snap, "]\n");
                buf_adds(&t->snap, BAR);
                buf_addc(&t->snap, '\n');
                sl_join(&l, &t->snap);
            }
            sl_free(&l);
        }
        fr_free(&fr);
    }
}

/* ---- writing ---- */

static void tmp_name(const Target *t, char *out, size_t cap) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, ".%s.tmp.%ld.%lld%09ld.%u", t->file, (long)getpid(), (long long)ts.tv_sec,
             ts.tv_nsec, ++g_counter);
}

static bool write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (k == 0) {
            errno = EIO;
            return false;
        }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Write bytes to a fresh temp file with the given mode, fsync it, close it. Returns the
 * temp name in tmp (and true), or false with errno set and the temp file removed. */
static bool write_temp(const Target *t, const char *p, size_t n, mode_t mode, char *tmp,
                       size_t cap) {
    int fd;
    for (int tries = 0;; tries++) {
        tmp_name(t, tmp, cap);
        fd = openat(g_dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) break;
        if ((errno == EEXIST || errno == EINTR) && tries < 100) continue;
        return false;
    }
    int e = 0;
    if (fchmod(fd, mode & 0777) != 0 || !write_all(fd, p, n) || fsync(fd) != 0) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (e) {
        unlinkat(g_dirfd, tmp, 0);
        errno = e ? e : EIO;
        return false;
    }
    return true;
}

/* Compare a file of the root (never following a link) with bytes: 1 same, 0 absent, -1 taken. */
static int file_holds(const char *name, const char *p, size_t n) {
    int fd = openat(g_dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != n) {
        close(fd);
        return -1;
    }
    Buf b = {0};
    bool ok = read_fd_all(fd, &b);
    close(fd);
    int r = (ok && str_eq(b.p ? b.p : "", b.n, p, n)) ? 1 : -1;
    buf_free(&b);
    return r;
}

/* DRIFT-5, DRIFT-4: a byte-exact, content-addressed backup. Returns the backup's file name
 * (malloc'd) or NULL on failure (errno set). */
static char *make_backup(const Target *t, const char *p, size_t n) {
    char hex[65];
    sha256_hex(p, n, hex);
    char base[256];
    snprintf(base, sizeof base, "%s.bak.%.16s", t->file, hex);
    int r = file_holds(base, p, n);
    if (r == 1) return xstrdup(base);
    char chosen[300];
    if (r == 0) {
        snprintf(chosen, sizeof chosen, "%s", base);
    } else {
        /* the name is taken by other bytes: look for a backup that already holds these */
        int dfd = openat(g_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d && dfd >= 0) close(dfd);
        if (d) {
            char prefix[128];
            snprintf(prefix, sizeof prefix, "%s.bak.", t->file);
            size_t pl = strlen(prefix);
            struct dirent *de;
            char *found = NULL;
            while ((de = readdir(d)) != NULL) {
                if (strncmp(de->d_name, prefix, pl) != 0) continue;
                if (file_holds(de->d_name, p, n) == 1) {
                    found = xstrdup(de->d_name);
                    break;
                }
            }
            closedir(d);
            if (found) return found;
        }
        int k = 2;
        for (;; k++) {
            snprintf(chosen, sizeof chosen, "%s-%d", base, k);
            int s = file_holds(chosen, p, n);
            if (s == 1) return xstrdup(chosen);
            if (s == 0) break;
            if (k > 10000) {
                errno = EEXIST;
                return NULL;
            }
        }
    }
    char tmp[300];
    if (!write_temp(t, p, n, 0600, tmp, sizeof tmp)) return NULL;
    if (renameat(g_dirfd, tmp, g_dirfd, chosen) != 0) {
        int e = errno;
        unlinkat(g_dirfd, tmp, 0);
        errno = e;
        return NULL;
    }
    /* the backup is made durable before the rewrite; a failed sync cannot undo it: the backup
     * is in place for every reader, so it is still named (as ATOMIC-3 for the data file) */
    if (fsync(g_dirfd) != 0)
        fprintf(stderr, "memspec_backend: syncing the root after backup %s failed: %s\n", chosen,
                strerror(errno));
    return xstrdup(chosen);
}

/* CRASH-2: remove the temp files a crashed writer of this target left (under the lock). */
static void sweep_temps(const Target *t) {
    int dfd = openat(g_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    char prefix[128];
    snprintf(prefix, sizeof prefix, ".%s.tmp.", t->file);
    size_t pl = strlen(prefix);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, prefix, pl) == 0) unlinkat(g_dirfd, de->d_name, 0);
    closedir(d);
}

/* ------------------------------------------------------------------ */
/* answers                                                              */

typedef struct {
    Buf extra; /* extra fields, each starting with ',' */
    const char *code;
} Ans;

static void ans_field_str(Ans *a, const char *key, const char *s, size_t n) {
    buf_addf(&a->extra, ",\"%s\":", key);
    json_str(&a->extra, s, n);
}

static void ans_usage(Ans *a, size_t used, long long limit) {
    Buf u = {0};
    usage_label(&u, used, limit);
    ans_field_str(a, "usage", u.p, u.n);
    buf_free(&u);
}

static void ans_msg(Ans *a, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    ans_field_str(a, "message", tmp, strlen(tmp));
}

static void emit(const char *id, Ans *a) {
    Buf o = {0};
    buf_adds(&o, "{\"id\":");
    buf_adds(&o, id);
    buf_adds(&o, strcmp(a->code, "OK") == 0 ? ",\"ok\":true" : ",\"ok\":false");
    buf_adds(&o, ",\"code\":");
    json_cstr(&o, a->code);
    if (a->extra.n) buf_add(&o, a->extra.p, a->extra.n);
    buf_adds(&o, "}\n");
    fwrite(o.p, 1, o.n, stdout);
    if (fflush(stdout) != 0) exit(0);
    buf_free(&o);
}

/* ------------------------------------------------------------------ */
/* mutations                                                            */

enum { OP_ADD, OP_REPLACE, OP_REMOVE, OP_PATCH, OP_BATCH };

static int target_index(const JVal *v) {
    if (!v || v->t != J_STR) return -1;
    if (str_eq(v->s, v->n, "memory", 6)) return 0;
    if (str_eq(v->s, v->n, "user", 4)) return 1;
    return -1;
}

static bool content_refused(const Buf *c) {
    return has_delim_line(c->p, c->n) || starts_with_bom(c->p, c->n) ||
           has_lone_surrogate(c->p, c->n);
}

/* MATCH-6: the entry, or its first 80 code points and "..." */
static void add_preview(Buf *b, const Str *e) {
    size_t cut = 0, cps = 0;
    while (cut < e->n && cps < 80) {
        size_t len;
        utf8_get(e->p + cut, e->n - cut, &len);
        cut += len;
        cps++;
    }
    if (cut < e->n) {
        Buf pv = {0};
        buf_add(&pv, e->p, cut);
        buf_adds(&pv, "...");
        json_str(b, pv.p, pv.n);
        buf_free(&pv);
    } else {
        json_str(b, e->p, e->n);
    }
}

/* MATCH-1 to MATCH-5: returns the index, -1 for no match, -2 for an ambiguity (with the
 * JSON list of previews in matches). */
static long choose(const StrList *l, const Buf *old, Buf *matches) {
    long first = -1;
    bool distinct = false;
    for (size_t i = 0; i < l->n; i++)
        if (str_eq(l->v[i].p, l->v[i].n, old->p, old->n)) return (long)i;
    for (size_t i = 0; i < l->n; i++) {
        if (!memmem(l->v[i].p, l->v[i].n, old->p, old->n)) continue;
        if (first < 0)
            first = (long)i;
        else if (!str_eq(l->v[i].p, l->v[i].n, l->v[first].p, l->v[first].n))
            distinct = true;
    }
    if (first < 0) return -1;
    if (!distinct) return first;
    buf_addc(matches, '[');
    bool any = false;
    for (size_t i = 0; i < l->n; i++) {
        if (!memmem(l->v[i].p, l->v[i].n, old->p, old->n)) continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = str_eq(l->v[k].p, l->v[k].n, l->v[i].p, l->v[i].n);
        if (seen) continue; /* a text seen earlier was a candidate too */
        if (any) buf_addc(matches, ',');
        any = true;
        add_preview(matches, &l->v[i]);
    }
    buf_addc(matches, ']');
    return -2;
}

typedef struct {
    int action; /* OP_ADD, OP_REPLACE, OP_REMOVE, OP_PATCH */
    Buf content, old;
} Item;

static void items_free(Item *it, size_t n) {
    for (size_t i = 0; i < n; i++) {
        buf_free(&it[i].content);
        buf_free(&it[i].old);
    }
    free(it);
}

/* ENTRY-7, ENTRY-2, ENTRY-6, ENTRY-3, ENTRY-4 for one item: NULL when it is fine. */
static const char *check_item(int action, const JVal *cv, const JVal *ov, Item *it) {
    bool need_c = action != OP_REMOVE, need_o = action != OP_ADD;
    if ((need_c && (!cv || cv->t != J_STR)) || (need_o && (!ov || ov->t != J_STR)))
        return "E_INVALID";
    it->action = action;
    buf_reserve(&it->content, 0);
    buf_reserve(&it->old, 0);
    if (need_c) normalise(cv->s, cv->n, &it->content);
    if (need_o) normalise(ov->s, ov->n, &it->old);
    /* PATCH-5: a patch's content may be empty (it deletes the span) */
    if ((need_c && action != OP_PATCH && it->content.n == 0) || (need_o && it->old.n == 0))
        return "E_EMPTY";
    if (need_c && it->content.n && content_refused(&it->content)) return "E_DELIMITER";
    return NULL;
}

static const char *arg_message(const char *code) {
    if (strcmp(code, "E_INVALID") == 0)
        return "malformed request: content, new_content and old_text must be strings; a batch "
               "needs a list of {action: add|replace|remove, content?, old_text?} items";
    if (strcmp(code, "E_EMPTY") == 0) return "content or old_text is empty after stripping whitespace";
    return "content cannot be stored as one entry: it holds a line that is only \xC2\xA7, starts "
           "with U+FEFF or holds a lone surrogate";
}

static bool lists_equal(const StrList *a, const StrList *b) {
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++)
        if (!str_eq(a->v[i].p, a->v[i].n, b->v[i].p, b->v[i].n)) return false;
    return true;
}

static void sl_remove_at(StrList *l, size_t k) {
    free(l->v[k].p);
    memmove(l->v + k, l->v + k + 1, (l->n - k - 1) * sizeof *l->v);
    l->n--;
}

static void sl_set(StrList *l, size_t k, const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (!s) die_oom();
    if (n) memcpy(s, p, n);
    s[n] = 0;
    free(l->v[k].p);
    l->v[k].p = s;
    l->v[k].n = n;
}

/* PATCH-3, PATCH-4, PATCH-6: replace the one span old_text in entry k. */
static const char *patch_entry(StrList *res, size_t k, const Item *it, Buf *matches) {
    const Str *e = &res->v[k];
    size_t count = 0, pos = 0, off = 0;
    while (off + it->old.n <= e->n) {
        const char *f = memmem(e->p + off, e->n - off, it->old.p, it->old.n);
        if (!f) break;
        if (count++ == 0) pos = (size_t)(f - e->p);
        off = (size_t)(f - e->p) + 1; /* overlapping occurrences count too */
    }
    if (count > 1) {
        buf_addc(matches, '[');
        add_preview(matches, e);
        buf_addc(matches, ']');
        return "E_AMBIGUOUS";
    }
    Buf r = {0}, rn = {0};
    buf_add(&r, e->p, pos);
    buf_add(&r, it->content.p, it->content.n);
    buf_add(&r, e->p + pos + it->old.n, e->n - pos - it->old.n);
    buf_reserve(&rn, 0);
    normalise(r.p, r.n, &rn);
    const char *code = NULL;
    if (rn.n == 0)
        code = "E_EMPTY";
    else if (content_refused(&rn))
        code = "E_DELIMITER";
    else
        sl_set(res, k, rn.p, rn.n);
    buf_free(&r);
    buf_free(&rn);
    return code;
}

static void ans_backup(Ans *a, const char *name) {
    Buf path = {0};
    buf_adds(&path, g_root);
    if (!path.n || path.p[path.n - 1] != '/') buf_addc(&path, '/');
    buf_adds(&path, name);
    ans_field_str(a, "backup", path.p, path.n);
    buf_free(&path);
}

static void do_mutation(int op, const JVal *req, Ans *a) {
    int ti = target_index(jget(req, "target"));
    if (ti < 0) {
        a->code = "E_TARGET";
        ans_msg(a, "target must be \"memory\" or \"user\"");
        return;
    }
    Target *t = &T[ti];

    /* the arguments, before the file is touched (CONTRACT-5, BATCH-6) */
    Item *items = NULL;
    size_t nitems = 0;
    const char *bad = NULL;
    if (op == OP_BATCH) {
        const JVal *ops = jget(req, "operations");
        if (!ops || ops->t != J_ARR) {
            bad = "E_INVALID";
        } else if (ops->count == 0) {
            bad = "E_EMPTY";
        } else {
            items = calloc(ops->count, sizeof *items);
            if (!items) die_oom();
            nitems = ops->count;
            for (size_t i = 0; i < nitems && !bad; i++) {
                const JVal *o = ops->items[i];
                const JVal *av = jget(o, "action");
                int action = -1;
                if (o->t == J_OBJ && av && av->t == J_STR) {
                    if (str_eq(av->s, av->n, "add", 3)) action = OP_ADD;
                    if (str_eq(av->s, av->n, "replace", 7)) action = OP_REPLACE;
                    if (str_eq(av->s, av->n, "remove", 6)) action = OP_REMOVE;
                }
                if (action < 0)
                    bad = "E_INVALID";
                else
                    bad = check_item(action, jget(o, "content"), jget(o, "old_text"), &items[i]);
            }
        }
    } else {
        items = calloc(1, sizeof *items);
        if (!items) die_oom();
        nitems = 1;
        bad = check_item(op, jget(req, op == OP_REPLACE ? "new_content" : "content"),
                         jget(req, "old_text"), &items[0]);
    }
    if (bad) {
        a->code = bad;
        ans_msg(a, "%s", arg_message(bad));
        items_free(items, nitems);
        return;
    }

    /* LOCK-1, FILES-3: an exclusive flock on a separate lock file, never following a link */
    char lockname[128];
    snprintf(lockname, sizeof lockname, "%s.lock", t->file);
    int lfd;
    do lfd = openat(g_dirfd, lockname, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    while (lfd < 0 && errno == EINTR);
    if (lfd < 0) {
        a->code = "E_IO";
        ans_msg(a, "cannot open the lock file %s: %s", lockname, strerror(errno));
        items_free(items, nitems);
        return;
    }
    int fl;
    do fl = flock(lfd, LOCK_EX);
    while (fl != 0 && errno == EINTR);
    if (fl != 0) {
        a->code = "E_IO";
        ans_msg(a, "cannot lock %s: %s", lockname, strerror(errno));
        close(lfd);
        items_free(items, nitems);
        return;
    }
    sweep_temps(t); /* CRASH-2, under the lock */

    FileRead fr;
    read_target(t, &fr);
    StrList cur = {0}, res = {0};
    Buf matches = {0}, nb = {0};
    char *backup = NULL;
    if (fr.state == FS_UNREADABLE) {
        a->code = "E_UNREADABLE";
        ans_msg(a, "%s exists but cannot be read or decoded (%s); nothing was written. Re-save it "
                   "as UTF-8, or move it aside, and try again",
                t->file, strerror(fr.err));
        goto done;
    }
    if (fr.state == FS_OK) parse_entries(fr.bytes, fr.n, &cur);
    sl_copy(&t->live, &cur); /* LOCK-2: every decision on what was just read */
    size_t used = usage_of(&cur);
    /* DRIFT: a foreign file holds an entry that alone is longer than the limit */
    bool foreign = false;
    for (size_t i = 0; i < cur.n && !foreign; i++)
        foreign = cp_count(cur.v[i].p, cur.v[i].n) > (size_t)t->limit;

    /* apply the items in order to a working copy (BATCH-3) */
    sl_copy(&res, &cur);
    bool duplicate = false;
    const char *refusal = NULL;
    for (size_t i = 0; i < nitems && !refusal; i++) {
        Item *it = &items[i];
        if (it->action == OP_ADD) {
            bool dup = false;
            for (size_t k = 0; k < res.n && !dup; k++)
                dup = str_eq(res.v[k].p, res.v[k].n, it->content.p, it->content.n);
            if (dup)
                duplicate = true; /* DUP-1: a no-op */
            else
                sl_push(&res, it->content.p, it->content.n);
            continue;
        }
        matches.n = 0;
        long k = choose(&res, &it->old, &matches);
        if (k == -1) {
            refusal = "E_NOMATCH";
        } else if (k == -2) {
            refusal = "E_AMBIGUOUS";
        } else if (it->action == OP_REPLACE) {
            sl_set(&res, (size_t)k, it->content.p, it->content.n);
        } else if (it->action == OP_PATCH) {
            refusal = patch_entry(&res, (size_t)k, it, &matches);
        } else {
            sl_remove_at(&res, (size_t)k);
        }
    }
    size_t nused = usage_of(&res);
    bool unchanged = !refusal && lists_equal(&res, &cur);
    if (foreign && !unchanged && (refusal || nused > used)) {
        /* DRIFT-2, DRIFT-3: refuse, after a byte-exact backup the answer names */
        backup = make_backup(t, fr.bytes, fr.n);
        if (!backup) {
            a->code = "E_IO";
            ans_msg(a, "cannot back up %s: %s", t->file, strerror(errno));
            goto done;
        }
        a->code = "E_DRIFT";
        ans_msg(a, "%s was changed outside the store: an entry is longer than the limit of %lld "
                   "characters, so this change is refused. Its bytes are saved in %s. To repair it, "
                   "put a line holding only \xC2\xA7 between the pieces of text, or shorten the piece "
                   "that is over the limit: with a remove, or a replace that does not grow the "
                   "target, or in an editor",
                t->file, t->limit, backup);
        ans_backup(a, backup);
        goto done;
    }
    if (refusal) {
        a->code = refusal;
        if (strcmp(refusal, "E_NOMATCH") == 0) {
            ans_msg(a, "no entry of %s contains old_text", t->file);
        } else if (strcmp(refusal, "E_AMBIGUOUS") == 0) {
            ans_msg(a, "old_text matches several distinct entries, or occurs more than once in "
                       "the entry to patch; give a longer old_text");
            buf_adds(&a->extra, ",\"matches\":");
            buf_add(&a->extra, matches.p, matches.n);
        } else {
            ans_msg(a, "the patched entry %s", strcmp(refusal, "E_EMPTY") == 0
                                                   ? "would be empty: use remove to delete an entry"
                                                   : "could not be stored as one entry");
        }
        goto done;
    }
    if (unchanged) { /* FORMAT-6: nothing to write, no backup */
        a->code = "OK";
        if (duplicate && op == OP_ADD) buf_adds(&a->extra, ",\"duplicate\":true");
        ans_usage(a, used, t->limit);
        goto done;
    }
    if (nused > (size_t)t->limit && nused > used) { /* LIMIT-2, LIMIT-4, BATCH-4 */
        a->code = "E_LIMIT";
        ans_msg(a, "the result would use %zu of %lld characters; remove or shorten entries first",
                nused, t->limit);
        ans_usage(a, used, t->limit);
        goto done;
    }

    /* FILES-4: never replace a symbolic link */
    struct stat lst;
    if (fstatat(g_dirfd, t->file, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
        a->code = "E_IO";
        ans_msg(a, "%s is a symbolic link; refusing to replace it", t->file);
        goto done;
    }

    /* DRIFT-5: back up bytes no store on this root last wrote; DRIFT-2: every foreign file */
    if (cur.n > 0) {
        bool own = false;
        if (!foreign) {
            Buf canon = {0};
            sl_join(&cur, &canon);
            char dig[65];
            sha256_hex(canon.p ? canon.p : "", canon.n, dig);
            buf_free(&canon);
            char rec[130];
            ssize_t rn = pread(lfd, rec, sizeof rec, 0);
            own = rn == 64 && memcmp(rec, dig, 64) == 0;
        }
        if (!own) {
            backup = make_backup(t, fr.bytes, fr.n);
            if (!backup) {
                a->code = "E_IO";
                ans_msg(a, "cannot back up %s before rewriting it: %s", t->file, strerror(errno));
                goto done;
            }
        }
    }

    /* ATOMIC-1, ATOMIC-2: temp file, fsync, rename */
    sl_join(&res, &nb);
    char tmp[300];
    mode_t mode = fr.state == FS_OK ? (fr.mode & 0777) : 0600;
    if (!write_temp(t, nb.p ? nb.p : "", nb.n, mode, tmp, sizeof tmp)) {
        a->code = "E_IO";
        ans_msg(a, "cannot write %s: %s; the file is unchanged", t->file, strerror(errno));
        goto done;
    }
    if (renameat(g_dirfd, tmp, g_dirfd, t->file) != 0) {
        int e = errno;
        unlinkat(g_dirfd, tmp, 0);
        a->code = "E_IO";
        ans_msg(a, "cannot replace %s: %s; the file is unchanged", t->file, strerror(e));
        goto done;
    }
    a->code = "OK";
    /* ATOMIC-3: the rename survives power loss only once the directory is synced */
    if (fsync(g_dirfd) != 0)
        ans_msg(a, "written, but durability is not confirmed: syncing the directory failed (%s)",
                strerror(errno));
    /* record what a store on this root last wrote, under the lock, after the rename */
    char dig[65];
    sha256_hex(nb.p ? nb.p : "", nb.n, dig);
    if (pwrite(lfd, dig, 64, 0) == 64) {
        if (ftruncate(lfd, 64) != 0) { /* an unreadable record only costs an extra backup */
        }
    }
    sl_copy(&t->live, &res);
    ans_usage(a, nused, t->limit);
    if (backup) ans_backup(a, backup);
done:
    free(backup);
    buf_free(&nb);
    buf_free(&matches);
    sl_free(&res);
    sl_free(&cur);
    fr_free(&fr);
    flock(lfd, LOCK_UN);
    close(lfd);
    items_free(items, nitems);
}

/* ------------------------------------------------------------------ */
/* the protocol                                                         */

static bool positive_int(const JVal *v, long long *out) {
    if (!v || v->t != J_NUM || !v->b) return false;
    errno = 0;
    char *end;
    long long x = strtoll(v->s, &end, 10);
    if (errno || *end || x <= 0) return false;
    *out = x;
    return true;
}

static void handle(const char *line, size_t n) {
    Ans a = {{0}, "OK"};
    JVal *req = jparse(line, n);
    char id[64] = "null";
    if (!req || req->t != J_OBJ) {
        a.code = "E_INVALID";
        ans_msg(&a, "the request is not a JSON object");
        emit(id, &a);
        buf_free(&a.extra);
        jfree(req);
        return;
    }
    const JVal *idv = jget(req, "id");
    if (idv && idv->t == J_NUM && idv->b && idv->n < sizeof id) snprintf(id, sizeof id, "%s", idv->s);
    const JVal *opv = jget(req, "op");
    const char *op = (opv && opv->t == J_STR && strlen(opv->s) == opv->n) ? opv->s : "";

    if (strcmp(op, "open") == 0) {
        const JVal *root = jget(req, "root");
        long long ml, ul;
        if (!root || root->t != J_STR || strlen(root->s) != root->n || root->n == 0 ||
            !positive_int(jget(req, "memory_char_limit"), &ml) ||
            !positive_int(jget(req, "user_char_limit"), &ul)) {
            a.code = "E_INVALID";
            ans_msg(&a, "open needs root (a directory) and two positive limits");
        } else {
            int fd = open(root->s, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0) {
                a.code = "E_INVALID";
                ans_msg(&a, "cannot open the root: %s", strerror(errno));
            } else {
                if (g_dirfd >= 0) close(g_dirfd);
                g_dirfd = fd;
                free(g_root);
                g_root = xstrdup(root->s);
                T[0].limit = ml;
                T[1].limit = ul;
                buf_adds(&a.extra, ",\"features\":[\"core\",\"batch\",\"patch\",\"drift-guard\","
                                   "\"multi-process\",\"crash-safe\",\"durable\"],\"backend\":\"" BACKEND_NAME
                                   "\",\"version\":\"" BACKEND_VERSION "\"");
            }
        }
    } else if (g_dirfd < 0) {
        a.code = "E_INVALID";
        ans_msg(&a, "the first request must be open");
    } else if (strcmp(op, "load") == 0) {
        do_load();
    } else if (strcmp(op, "add") == 0) {
        do_mutation(OP_ADD, req, &a);
    } else if (strcmp(op, "replace") == 0) {
        do_mutation(OP_REPLACE, req, &a);
    } else if (strcmp(op, "remove") == 0) {
        do_mutation(OP_REMOVE, req, &a);
    } else if (strcmp(op, "patch") == 0) {
        do_mutation(OP_PATCH, req, &a);
    } else if (strcmp(op, "batch") == 0) {
        do_mutation(OP_BATCH, req, &a);
    } else if (strcmp(op, "entries") == 0 || strcmp(op, "snapshot") == 0) {
        int ti = target_index(jget(req, "target"));
        if (ti < 0) {
            a.code = "E_TARGET";
        } else if (op[0] == 'e') {
            buf_adds(&a.extra, ",\"entries\":[");
            for (size_t i = 0; i < T[ti].live.n; i++) {
                if (i) buf_addc(&a.extra, ',');
                json_str(&a.extra, T[ti].live.v[i].p, T[ti].live.v[i].n);
            }
            buf_addc(&a.extra, ']');
        } else if (T[ti].snap_null) {
            buf_adds(&a.extra, ",\"snapshot\":null");
        } else {
            ans_field_str(&a, "snapshot", T[ti].snap.p, T[ti].snap.n);
        }
    } else {
        /* fence, tool_*, agent_* and anything else: not claimed */
        a.code = "E_UNSUPPORTED";
        ans_msg(&a, "this backend does not support the op");
    }
    emit(id, &a);
    buf_free(&a.extra);
    jfree(req);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) != -1) {
        size_t n = (size_t)len;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        size_t k = 0;
        while (k < n && (line[k] == ' ' || line[k] == '\t')) k++;
        handle(line + k, n - k); /* a blank line is answered E_INVALID, id null */
    }
    free(line);
    for (int i = 0; i < 2; i++) {
        sl_free(&T[i].live);
        buf_free(&T[i].snap);
    }
    free(g_root);
    if (g_dirfd >= 0) close(g_dirfd);
    return 0;
}
