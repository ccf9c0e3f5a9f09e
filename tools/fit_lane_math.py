#!/usr/bin/python3
"""Fits the polynomials of runtime/lane_math.h and prints them as C floats.

Each is the Chebyshev interpolant (mpmath's chebyfit, 40 digits) of a smooth
function on the interval its formula takes it on, rounded to float; the
header's accuracy is then measured, not assumed (tests/lane_math/check.cpp).

  erf, |x| < 1:       erf(a) = a + a * Q(a^2),        Q(t) = erf(sqrt t) / sqrt t - 1
  erf, 1 <= |x| < 4:  erf(a) = 1 - exp(-a^2) * G(1/a) / a,
                      G(u) = erfc(a) exp(a^2) a, a = 1/u, fitted in w = u - 5/8
                      (centred, so that its terms shrink and float's roundings stay small)
  exp:                exp(r) = 1 + r + r^2 * H(r), |r| <= ln(2) / 2
  tanh, |x| < 0.9:    tanh(a) = a + a * t * P(t), t = a^2, P(t) = (tanh(sqrt t) / sqrt t - 1) / t
                      (beyond, 1 - 2 / (exp(2a) + 1), which loses nothing there)

Run with Debian's python3 (python3-mpmath comes with python3-torch). It
takes no arguments (exit 2, with usage, for any but --help).
"""
import argparse
import struct

import mpmath as mp

mp.mp.dps = 40


def as_float(x):
    return struct.unpack('f', struct.pack('f', float(x)))[0]


def q(t):
    if t == 0:
        return 2 / mp.sqrt(mp.pi) - 1
    s = mp.sqrt(t)
    return mp.erf(s) / s - 1


def g(w):
    a = 1 / (w + mp.mpf(5) / 8)
    return mp.erfc(a) * mp.exp(a * a) * a


def p(t):
    if t == 0:
        return -mp.mpf(1) / 3
    s = mp.sqrt(t)
    return (mp.tanh(s) / s - 1) / t


def h(r):
    if r == 0:
        return mp.mpf(1) / 2
    return (mp.exp(r) - 1 - r) / (r * r)


HALF_LN2 = mp.log(2) / 2
FITS = [
    ('ERF_SMALL', q, [0, 1], 7),
    ('ERF_LARGE', g, [-mp.mpf(3) / 8, mp.mpf(3) / 8], 9),
    ('EXP', h, [-HALF_LN2, HALF_LN2], 5),
    ('TANH_SMALL', p, [0, mp.mpf('0.9') ** 2], 7),
]


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    for name, f, interval, terms in FITS:
        coeffs, err = mp.chebyfit(f, interval, terms, error=True)
        print('/* %s: %d terms, highest power first; interpolation error %s */' % (name, terms, mp.nstr(err, 2)))
        print('    ' + ', '.join('%.9ef' % as_float(c) for c in coeffs))


if __name__ == '__main__':
    main()
