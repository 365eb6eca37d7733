package units

import (
	"math/big"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// corpus056 is the right value, in MiB, of every token in
// testdata/corpus/056 for gssh (corpus README row 056); 0 = an error.
var corpus056 = map[string]uint64{
	"8G":     8192,
	"8192":   8192,
	"4G":     4096,
	"4000":   4000,
	"0.5G":   512,
	"3072M":  3072,
	"120.0g": 122880,
	"2.5gb":  2560,
	"10GB":   10240,
	"50g":    51200,
	"500G":   512000,
	"48G":    49152,
	"1T":     1048576,
	"512M":   512,
	"0":      0, // Slurm's "all node memory"; a per-job request of 0 is an error
	"1024K":  1,
	"60GiB":  61440,
	"..4GB":  0, // dstack's range syntax
}

func TestParseMemCorpus056(t *testing.T) {
	b, err := os.ReadFile("testdata/corpus/056-mem-size-tokens-seen-in-the-wild.txt")
	if err != nil {
		t.Fatal(err)
	}
	tokens := strings.Fields(string(b))
	if len(tokens) != len(corpus056) {
		t.Errorf("corpus has %d tokens, the table %d", len(tokens), len(corpus056))
	}
	for _, tok := range tokens {
		want, ok := corpus056[tok]
		if !ok {
			t.Errorf("token %q has no expected value", tok)
			continue
		}
		got, err := ParseMem(tok)
		switch {
		case want == 0 && err == nil:
			t.Errorf("ParseMem(%q) = %d, want an error", tok, got)
		case want != 0 && (err != nil || got != want*MiB):
			t.Errorf("ParseMem(%q) = %d MiB, %v; want %d MiB", tok, got/MiB, err, want)
		}
	}
}

// Corpus 057: the values Slurm (or DRMAA) refused are plain sizes for gssh,
// normalised to whole MiB (README row 057: 122880M, 2560M, 4096M).
func TestParseMemCorpus057(t *testing.T) {
	b, err := os.ReadFile("testdata/corpus/057-mem-slurm-rejections-error-lines.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"120.0g": 122880, "2.5gb": 2560, "4G": 4096}
	seen := 0
	for _, m := range regexp.MustCompile(`--mem=([^\s"]+)`).FindAllStringSubmatch(string(b), -1) {
		tok := m[1]
		mib, ok := want[tok]
		if !ok {
			t.Errorf("token %q has no expected value", tok)
			continue
		}
		seen++
		if got, err := ParseMem(tok); err != nil || got != mib*MiB {
			t.Errorf("ParseMem(%q) = %d MiB, %v; want %d MiB", tok, got/MiB, err, mib)
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of %d --mem values in the corpus", seen, len(want))
	}
}

func TestParseMem(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint64 // MiB
	}{
		{"8G", 8192}, {"8GB", 8192}, {"8GiB", 8192}, {"8g", 8192}, {"8gib", 8192}, {"8Gb", 8192}, {"8gIB", 8192},
		{"1", 1}, {"000512", 512}, {"512MiB", 512}, {"512mb", 512},
		{"1K", 1}, {"1k", 1}, {"1KiB", 1}, {"1.5K", 1}, {"1024K", 1}, {"1025K", 2}, {"1048577K", 1025},
		{"0.1", 1}, {"0.0001M", 1}, {".5G", 512}, {"8.G", 8192}, {"2.55G", 2612}, {"0.5T", 524288},
		{"1024.0000000000000000000000000001K", 2}, {"1.0000000000000000000000000001K", 1},
		{"1023." + strings.Repeat("9", 100000) + "K", 1},
		{"1024." + strings.Repeat("0", 100000) + "1K", 2},
		{"0." + strings.Repeat("0", 30) + "1T", 1},
		{"1." + strings.Repeat("0", 40) + "G", 1024},
		{strings.Repeat("0", 100) + "1", 1},
		{"17592186044415", 17592186044415}, // 16 EiB less 1 MiB: the largest
		{"16777215T", 17592184995840},
	} {
		got, err := ParseMem(tt.in)
		if err != nil || got != tt.want*MiB {
			t.Errorf("ParseMem(%q) = %d (%d MiB), %v; want %d MiB", tt.in, got, got/MiB, err, tt.want)
		}
	}
}

func TestParseMemErrors(t *testing.T) {
	for _, tt := range []struct{ in, why string }{
		{"", "empty memory size"},
		{" 8G", "remove the spaces"},
		{"8G ", "remove the spaces"},
		{"8 G", "remove the spaces"},
		{"8\tG", "remove the spaces"},
		{"8G\n", "remove the spaces"},
		{"8\u00a0G", "remove the spaces"},
		{"-1", "must be more than 0"},
		{"-8G", "must be more than 0"},
		{"0", "must be more than 0"},
		{"0.0", "must be more than 0"},
		{"0G", "must be more than 0"},
		{"000", "must be more than 0"},
		{"8X", `unknown unit "X"`},
		{"8GB/s", `unknown unit "GB/s"`},
		{"8B", `unknown unit "B"`},
		{"8Gi", `unknown unit "Gi"`},
		{"8GBB", `unknown unit "GBB"`},
		{"8P", `unknown unit "P"`},
		{"8\u212a", "unknown unit \"\u212a\""}, // the Kelvin sign, which Unicode folds to k
		{"..4GB", "not a number"},
		{".", "not a number"},
		{"G", "not a number"},
		{"+8G", "not a number"},
		{"0x10", "not a number"},
		{"1e3", "not a number"},
		{"1E3M", "not a number"},
		{"1.2.3", "not a number"},
		{"8-16G", "not a number"},
		{"NaN", "not a number"},
		{"Inf", "not a number"},
		{"infinity", "not a number"},
		{"16777216T", "too large"},
		{"17592186044416", "too large"},
		{"99999999999999999999999999999T", "too large"},
		{"100000000000000000000K", "too large"},
		{"17592186044415.00000000000000000000000000001", "too large"},
	} {
		_, err := ParseMem(tt.in)
		if err == nil {
			t.Errorf("ParseMem(%q): no error, want %q", tt.in, tt.why)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.why) || !strings.Contains(msg, memHelp) {
			t.Errorf("ParseMem(%q) error %q, want it to say %q and give examples", tt.in, msg, tt.why)
		}
	}
	_, err := ParseMem("8X")
	want := `invalid memory size "8X": unknown unit "X"; use a number of MiB or a number with K, M, G or T (like 8G, 8000M or 0.5G)`
	if err == nil || err.Error() != want {
		t.Errorf("ParseMem(8X) error:\n got %v\nwant %s", err, want)
	}
}

func TestFormatMem(t *testing.T) {
	for _, tt := range []struct {
		in   uint64
		want string
	}{
		{0, "0 MiB"},
		{1023, "0 MiB"},
		{MiB - 1, "0 MiB"},
		{MiB, "1 MiB"},
		{512 * MiB, "512 MiB"},
		{1023 * MiB, "1023 MiB"},
		{1024 * MiB, "1.0 GiB"},
		{8 << 30, "8.0 GiB"},
		{2560 * MiB, "2.5 GiB"},
		{40959 * MiB, "40.0 GiB"},
		{80 << 30, "80.0 GiB"},
		{1 << 40, "1.0 TiB"},
		{1536 << 30, "1.5 TiB"},
	} {
		if got := FormatMem(tt.in); got != tt.want {
			t.Errorf("FormatMem(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// refMiB works out an accepted size the slow way, with no shortcut: all
// digits, as a fraction, rounded up to MiB.
func refMiB(t *testing.T, s string) uint64 {
	m := regexp.MustCompile(`^([0-9]*)(?:\.([0-9]*))?([a-zA-Z]*)$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("ParseMem accepted %q", s)
	}
	shift := map[string]uint{"": 20, "k": 10, "m": 20, "g": 30, "t": 40}[strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.ToLower(m[3]), "b"), "i"))]
	num, _ := new(big.Int).SetString("0"+m[1]+m[2], 10)
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(m[2]))), nil)
	r := new(big.Rat).SetFrac(num.Lsh(num, shift), den.Lsh(den, 20))
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Uint64()
}

func FuzzParseMem(f *testing.F) {
	for tok := range corpus056 {
		f.Add(tok)
	}
	for _, s := range []string{"8GB/s", "8X", "0x10", "1e3", "NaN", " 8G", "-1", "1K", "0.0001M", "16777216T", "8\u212a", "1.5TiB", "1024.0000000000000000000000000001K", "0.00000000000000000000000000000000001T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseMem(s)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "invalid memory size ") && !strings.HasPrefix(msg, "empty memory size") {
				t.Fatalf("ParseMem(%q): error %q does not say what it is about", s, msg)
			}
			return
		}
		if v == 0 || v%MiB != 0 {
			t.Fatalf("ParseMem(%q) = %d: not a positive multiple of MiB", s, v)
		}
		if strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t") {
			t.Fatalf("ParseMem(%q) accepted spaces", s)
		}
		if want := refMiB(t, s); v != want*MiB {
			t.Fatalf("ParseMem(%q) = %d MiB, want %d MiB", s, v/MiB, want)
		}
		// A bare number of MiB reads back exactly.
		if w, err := ParseMem(strconv.FormatUint(v/MiB, 10)); err != nil || w != v {
			t.Fatalf("ParseMem(%d) = %d, %v; want %d", v/MiB, w, err, v)
		}
		// What FormatMem prints reads back to within its rounding.
		shown := strings.ReplaceAll(FormatMem(v), " ", "")
		w, err := ParseMem(shown)
		if err != nil {
			t.Fatalf("ParseMem(FormatMem(%d) = %q): %v", v, shown, err)
		}
		step := uint64(0) // half of FormatMem's last digit, plus the rounding up to MiB
		switch {
		case v >= 1<<40:
			step = 1<<40/20 + MiB
		case v >= 1<<30:
			step = 1<<30/20 + MiB
		}
		if diff := max(v, w) - min(v, w); diff > step {
			t.Fatalf("ParseMem(FormatMem(%d) = %q) = %d: off by %d", v, shown, w, diff)
		}
	})
}

// A log cap is kept to the byte: 1.5K is 1536 bytes, not a MiB as --mem
// would round it.
func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{
		"1K": 1024, "1.5K": 1536, "1000K": 1024000, "1.5M": 3 << 19, "2": 2 << 20,
		"0.001K": 2, "1b": 0, "8GiB": 8 << 30,
	} {
		got, err := ParseBytes(in)
		if in == "1b" {
			if err == nil {
				t.Errorf("ParseBytes(%q) = %d, want an error (B alone is no unit)", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1K", "garbage", "0.0000000000000000000000001K", "20000000000000000000T"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for b, want := range map[uint64]string{
		0: "0 B", 512: "512 B", 1024: "1 KiB", 1536: "1.5 KiB", 1 << 20: "1 MiB",
		3 << 19: "1.5 MiB", 5 << 30: "5 GiB", 1<<64 - 1: "16 EiB",
	} {
		if got := FormatBytes(b); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", b, got, want)
		}
	}
}
