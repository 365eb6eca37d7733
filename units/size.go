package units

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"unicode"
)

// MiB is one mebibyte in bytes: the unit of --mem and of nvidia-smi.
const MiB = 1 << 20

// memHelp ends every ParseMem error: what a valid size looks like.
const memHelp = "use a number of MiB or a number with K, M, G or T (like 8G, 8000M or 0.5G)"

// ParseMem reads a GPU memory size per GPU (--mem) and returns it in bytes,
// rounded up to a whole MiB (so the result is a positive multiple of MiB).
//
// A bare number is MiB. The suffixes K, M, G and T are binary multiples
// (KiB, MiB, GiB, TiB), may be followed by B or iB, and are
// case-insensitive: 8G, 8GB, 8GiB and 8gib are all 8 GiB. Fractions are
// converted exactly (0.5G = 512 MiB, 1K = 1 MiB after rounding up). Zero,
// signs, spaces, other suffixes, exponents and sizes beyond 16 EiB are
// errors that say what was wrong.
func ParseMem(s string) (uint64, error) { return parseSize(s, 20) }

// ParseBytes reads a size as ParseMem does (a bare number is MiB; K, M, G
// and T suffixes; fractions) but rounded up to a whole byte only, not to a
// MiB: a cap such as --log-limit 1.5K is 1536 bytes. The errors are
// ParseMem's.
func ParseBytes(s string) (uint64, error) { return parseSize(s, 0) }

// parseSize reads s as ParseMem describes, rounding the size up to a
// multiple of 2^gran bytes (20: MiB; 0: bytes).
func parseSize(s string, gran uint) (uint64, error) {
	bad := func(why string) (uint64, error) {
		return 0, fmt.Errorf("invalid memory size %q: %s; %s", s, why, memHelp)
	}
	switch {
	case s == "":
		return 0, errors.New("empty memory size: " + memHelp)
	case strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return bad("remove the spaces")
	case s[0] == '-':
		return bad("must be more than 0")
	}

	// The number: digits, then optionally '.' and more digits (".5" is 0.5).
	i := digitsEnd(s, 0)
	whole, frac := s[:i], ""
	if i < len(s) && s[i] == '.' {
		j := digitsEnd(s, i+1)
		frac, i = s[i+1:j], j
	}
	if whole == "" && frac == "" {
		return bad("not a number")
	}
	unit := s[i:]
	shift, ok := unitShift(unit)
	if !ok {
		if strings.ContainsAny(unit, "0123456789.+-") {
			return bad("not a number")
		}
		return bad(fmt.Sprintf("unknown unit %q", unit))
	}
	whole, frac = strings.TrimLeft(whole, "0"), strings.TrimRight(frac, "0")
	switch {
	case whole == "" && frac == "":
		return bad("must be more than 0")
	case len(whole) > 20: // 10^20 KiB is already beyond 16 EiB
		return bad("too large (the most is 16 EiB)")
	case gran == 0 && len(frac) > 24:
		return bad("too many decimals (24 at the most)")
	case len(frac) > 24:
		// Past 24 decimals only whether more digits follow matters. Cut
		// there, the size in MiB is x·2^k (k = shift−20, in −10..20): when
		// not whole, it is at least 2^k/10^24 below the next whole MiB, more
		// than the rest can add; when whole, any rest rounds it up. A
		// sticky 1 for the rest gives both, and keeps the arithmetic small.
		frac = frac[:24] + "1"
	}

	// bytes = whole.frac × 2^shift; units = ⌈bytes / 2^gran⌉, exactly.
	num, _ := new(big.Int).SetString(whole+frac, 10)
	num.Lsh(num, shift)
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	den.Lsh(den, gran)
	units, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if rem.Sign() > 0 {
		units.Add(units, big.NewInt(1))
	}
	if !units.IsUint64() || units.Uint64() > (1<<64-1)>>gran {
		return bad("too large (the most is 16 EiB)")
	}
	return units.Uint64() << gran, nil
}

// digitsEnd returns the index of the first byte at or after i in s that is
// not an ASCII digit.
func digitsEnd(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// unitShift maps a size suffix to its multiple of a byte as a power of two:
// "" (MiB) → 20, K → 10, M → 20, G → 30, T → 40, each optionally followed
// by B or iB, ASCII case-insensitive.
func unitShift(unit string) (uint, bool) {
	if unit == "" {
		return 20, true
	}
	u := asciiLower(unit)
	var shift uint
	switch u[0] {
	case 'k':
		shift = 10
	case 'm':
		shift = 20
	case 'g':
		shift = 30
	case 't':
		shift = 40
	default:
		return 0, false
	}
	switch u[1:] {
	case "", "b", "ib":
		return shift, true
	}
	return 0, false
}

// asciiLower lowers A-Z only: Unicode folding would let the Kelvin sign
// pass for a K.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// FormatMem prints a size in bytes in IEC units for people, as `gssh gpus`
// and pending reasons do: one decimal from GiB up ("8.0 GiB", "1.5 TiB"),
// whole MiB below, truncated ("512 MiB", "0 MiB"): GPU memory comes in MiB
// (nvidia-smi's unit, and --mem is rounded up to it).
func FormatMem(b uint64) string {
	switch {
	case b >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(b)/(1<<40))
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", b>>20)
}

// FormatBytes prints a size of any number of bytes in IEC units: "512 B",
// "1.5 KiB", "2 MiB", "1.2 GiB" (one decimal, left out when it is 0), for
// sizes that are not whole MiB, such as a --log-limit.
func FormatBytes(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if b < 1<<10 {
		return fmt.Sprintf("%d B", b)
	}
	v, i := float64(b), 0
	for v >= 1<<10 && i < len(units)-1 {
		v /= 1 << 10
		i++
	}
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0") + " " + units[i]
}
