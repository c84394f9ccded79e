package objects_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/errs"
	"github.com/memtier/memtier/runtime/objects"
)

// stCorpusDir holds the generated safetensors seed corpus (valid and broken
// files, plus expected.json). TestSafetensorsCorpus checks it matches
// stCases; run with MEMTIER_UPDATE_SAFETENSORS_CORPUS=1 to rewrite it.
var stCorpusDir = filepath.Join("testdata", "safetensors")

// stKinds are the message phrases ParseSafetensors uses for each kind of
// Format error (documented in safetensors.go).
var stKinds = []string{
	"header too small", "header too large", "invalid header length", "invalid header start",
	"invalid header encoding", "invalid JSON", "invalid entry", "duplicate", "invalid metadata",
	"invalid offsets", "range past end", "unknown dtype", "invalid shape",
	"shape overflow", "size mismatch", "overlapping tensors", "gap between tensors",
	"file length mismatch",
}

// stFile builds a safetensors file: the 8-byte length of header, header, data.
func stFile(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

// stRaw builds a file whose length field is n whatever follows.
func stRaw(n uint64, rest string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

// f32s encodes float32 values little-endian.
func f32s(vals ...float32) []byte {
	var out []byte
	for _, v := range vals {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	return out
}

// stPad pads a header with spaces to a multiple of 8 bytes, as writers do.
func stPad(h string) string {
	return h + strings.Repeat(" ", (8-len(h)%8)%8)
}

type stCase struct {
	name  string
	data  []byte
	kind  string                                     // "" for a valid file, else the expected kind phrase
	want  string                                     // extra substring the error message must hold
	check func(t *testing.T, s *objects.Safetensors) // extra checks on a valid file
}

// stCases is every hand-built file: the rules of the parser and field cases
// B11, B12, B13, B15 and B16 (tests/field_cases.md).
func stCases() []stCase {
	w1234 := f32s(1, 2, 3, 4)
	return []stCase{
		// Valid files.
		{name: "valid_single", data: stFile(stPad(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`), w1234),
			check: func(t *testing.T, s *objects.Safetensors) {
				w := s.Tensors[s.Index("w")]
				if w.DType != "F32" || w.ElemBits != 32 || !slices.Equal(w.Shape, []int64{4}) ||
					w.Begin != s.DataStart || w.End != s.DataStart+16 || s.Metadata != nil {
					t.Fatalf("w = %+v, meta %v", w, s.Metadata)
				}
			}},
		// B11 (c): the replaced file with metadata: header re-parsed, data start shifted.
		{name: "b11c_metadata_shift", data: stFile(stPad(`{"__metadata__":{"format":"pt","note":"replaced version"},"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`), f32s(5, 6, 7, 8)),
			check: func(t *testing.T, s *objects.Safetensors) {
				if s.Metadata["format"] != "pt" || s.Metadata["note"] != "replaced version" || len(s.Metadata) != 2 {
					t.Fatalf("metadata %v", s.Metadata)
				}
				if w := s.Tensors[s.Index("w")]; w.Begin != s.DataStart || s.DataStart <= 8+56 {
					t.Fatalf("w %+v data start %d", w, s.DataStart)
				}
			}},
		{name: "valid_empty_object", data: stFile("{}", nil),
			check: func(t *testing.T, s *objects.Safetensors) {
				if len(s.Tensors) != 0 || s.Metadata != nil || s.FileSize != 10 || s.Index("x") != -1 {
					t.Fatalf("%+v", s)
				}
			}},
		{name: "valid_empty_padded", data: stFile("{}      ", nil)},
		{name: "valid_metadata_only", data: stFile(`{"__metadata__":{"format":"pt","empty":""}}`, nil),
			check: func(t *testing.T, s *objects.Safetensors) {
				if len(s.Tensors) != 0 || len(s.Metadata) != 2 || s.Metadata["empty"] != "" {
					t.Fatalf("%+v", s)
				}
			}},
		{name: "valid_metadata_empty", data: stFile(`{"__metadata__":{}}`, nil),
			check: func(t *testing.T, s *objects.Safetensors) {
				if s.Metadata == nil || len(s.Metadata) != 0 {
					t.Fatalf("metadata %#v", s.Metadata)
				}
			}},
		{name: "valid_metadata_null", data: stFile(`{"__metadata__":null}`, nil)},
		// B12 (f): a valid header padded with trailing spaces to an 8-byte boundary.
		{name: "b12f_padded", data: stFile(stPad(`{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}`), []byte{1, 2, 3}),
			check: func(t *testing.T, s *objects.Safetensors) {
				if s.HeaderLen%8 != 0 || s.Tensors[0].Begin != s.DataStart {
					t.Fatalf("%+v", s)
				}
			}},
		{name: "valid_json_whitespace", data: stFile("{ \"a\" :\n\t{ \"shape\" : [ 2 ] , \"dtype\" : \"I16\" , \"data_offsets\" : [ 0 , 4 ] }\r\n}\n\t ", make([]byte, 4))},
		// B15 (d): zero-element tensors next to a real one.
		{name: "b15d_zero_size", data: stFile(stPad(`{"scale":{"dtype":"F8_E4M3","shape":[0],"data_offsets":[0,0]},"empty2d":{"dtype":"F32","shape":[2,0],"data_offsets":[0,0]},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), f32s(1)),
			check: func(t *testing.T, s *objects.Safetensors) {
				if len(s.Tensors) != 3 {
					t.Fatalf("%d tensors", len(s.Tensors))
				}
				sc := s.Tensors[s.Index("scale")]
				if !slices.Equal(sc.Shape, []int64{0}) || sc.Begin != sc.End || sc.ElemBits != 8 {
					t.Fatalf("scale %+v", sc)
				}
				e2 := s.Tensors[s.Index("empty2d")]
				if !slices.Equal(e2.Shape, []int64{2, 0}) || e2.Begin != e2.End {
					t.Fatalf("empty2d %+v", e2)
				}
				x := s.Tensors[s.Index("x")]
				if x.End-x.Begin != 4 || s.Index("x") != 2 {
					t.Fatalf("x %+v", x)
				}
				// The empty tensors sort first, in header order.
				if s.Tensors[0].Name != "scale" || s.Tensors[1].Name != "empty2d" {
					t.Fatalf("order %v", stNames(s))
				}
			}},
		{name: "valid_zero_size_between", data: stFile(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"z":{"dtype":"F64","shape":[0,5],"data_offsets":[2,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},"end":{"dtype":"BOOL","shape":[0],"data_offsets":[4,4]}}`, []byte{1, 2, 3, 4}),
			check: func(t *testing.T, s *objects.Safetensors) {
				if got := stNames(s); !slices.Equal(got, []string{"a", "z", "b", "end"}) {
					t.Fatalf("order %v", got)
				}
			}},
		{name: "valid_scalar", data: stFile(`{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, make([]byte, 8)),
			check: func(t *testing.T, s *objects.Safetensors) {
				if len(s.Tensors[0].Shape) != 0 || s.Tensors[0].Shape == nil {
					t.Fatalf("shape %#v", s.Tensors[0].Shape)
				}
			}},
		{name: "valid_unordered", data: stFile(`{"c":{"dtype":"U8","shape":[1],"data_offsets":[5,6]},"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[1],"data_offsets":[4,5]}}`, make([]byte, 6)),
			check: func(t *testing.T, s *objects.Safetensors) {
				if got := stNames(s); !slices.Equal(got, []string{"a", "b", "c"}) {
					t.Fatalf("order %v", got)
				}
				if s.Index("c") != 2 || s.Index("a") != 0 || s.Index("nope") != -1 {
					t.Fatal("Index")
				}
			}},
		{name: "valid_unknown_field", data: stFile(`{"a":{"dtype":"U8","extra":{"k":[1,{"x":null}]},"shape":[1],"data_offsets":[0,1],"more":true}}`, []byte{7})},
		{name: "valid_escaped_names", data: stFile(`{"\u00e9t\u00e9\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"ü.w":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, []byte{1, 2, 3}),
			check: func(t *testing.T, s *objects.Safetensors) {
				if s.Index("été\n") != 0 || s.Index("") != 1 || s.Index("ü.w") != 2 {
					t.Fatalf("names %q", stNames(s))
				}
			}},
		{name: "valid_large_dims", data: stFile(`{"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,3],"data_offsets":[0,3]},"z":{"dtype":"C64","shape":[9223372036854775807,0],"data_offsets":[3,3]}}`, []byte{1, 2, 3})},
		{name: "valid_all_dtypes", data: stAllDTypes(),
			check: func(t *testing.T, s *objects.Safetensors) {
				if len(s.Tensors) != 19 {
					t.Fatalf("%d tensors", len(s.Tensors))
				}
			}},

		// B12: bogus header lengths and starts.
		{name: "b12a_five_bytes", data: []byte("abcde"), kind: "header too small", want: "5 bytes"},
		{name: "empty_file", data: nil, kind: "header too small"},
		{name: "seven_bytes", data: make([]byte, 7), kind: "header too small"},
		{name: "b12b_zip_magic", data: append([]byte("PK\x03\x04"), make([]byte, 60)...), kind: "invalid header length", want: "67324752"},
		{name: "b12c_huge_length", data: stRaw(100_000_001, "{}"), kind: "header too large", want: "limit of 100000000 bytes"},
		{name: "max_u64_length", data: stRaw(math.MaxUint64, "{}"), kind: "header too large"},
		{name: "b12d_length_past_end", data: stRaw(64, `{"a":1}`+strings.Repeat(" ", 13)), kind: "invalid header length", want: "header length 64"},
		{name: "length_one_past_end", data: stRaw(3, "{}"), kind: "invalid header length"},
		{name: "b12e_array", data: stFile("[]", nil), kind: "invalid header start", want: `"[]"`},
		{name: "b12e_two_spaces", data: stFile("  ", nil), kind: "invalid header start"},
		{name: "b12e_zero_length", data: stFile("", nil), kind: "invalid header start", want: "empty header"},
		{name: "leading_tab_only", data: stFile("\t\n", nil), kind: "invalid header start", want: "only white space"},
		{name: "leading_bom", data: stFile("\xef\xbb\xbf{}", nil), kind: "invalid header start"},
		{name: "not_utf8", data: stFile(`{"a`+"\xff"+`":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid header encoding", want: "at offset 11"},

		// JSON syntax.
		{name: "json_truncated", data: stFile(`{"a":{"dtype":"U8"`, nil), kind: "invalid JSON", want: "at offset 26: invalid JSON: unexpected end of the header"},
		{name: "json_too_deep", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":`+strings.Repeat("[", 200)+strings.Repeat("]", 200)+`}}`, []byte{1}), kind: "invalid JSON", want: "nesting deeper than 128 levels"},
		{name: "json_trailing_comma", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],}}`, []byte{1}), kind: "invalid JSON", want: "at offset 60: invalid JSON: invalid character '}'"},
		{name: "json_bad_in_array", data: stFile(`{"a":{"dtype":"U8","shape":[1,,2],"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid JSON", want: "at offset 38: invalid JSON: invalid character ','"},
		{name: "json_trailing_garbage", data: stFile(`{} x`, nil), kind: "invalid JSON"},
		{name: "json_second_object", data: stFile(`{}{}`, nil), kind: "invalid JSON", want: "after the header object"},
		{name: "json_trailing_nul", data: stFile("{}\x00\x00", nil), kind: "invalid JSON"},
		{name: "json_single_quotes", data: stFile(`{'a':1}`, nil), kind: "invalid JSON"},
		{name: "json_unclosed", data: stFile(`{`, nil), kind: "invalid JSON"},

		// Entry types and fields.
		{name: "entry_not_object", data: stFile(`{"a":[1,2]}`, nil), kind: "invalid entry", want: `tensor "a"`},
		{name: "entry_string", data: stFile(`{"a":"F32"}`, nil), kind: "invalid entry"},
		{name: "entry_null", data: stFile(`{"a":null}`, nil), kind: "invalid entry"},
		{name: "entry_missing_dtype", data: stFile(`{"a":{"shape":[1],"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid entry", want: "has no dtype"},
		{name: "entry_missing_shape", data: stFile(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, []byte{1}), kind: "invalid entry", want: "has no shape"},
		{name: "entry_missing_offsets", data: stFile(`{"a":{"dtype":"U8","shape":[1]}}`, []byte{1}), kind: "invalid entry", want: "has no data_offsets"},
		{name: "dtype_not_string", data: stFile(`{"a":{"dtype":8,"shape":[1],"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid entry"},
		{name: "shape_not_array", data: stFile(`{"a":{"dtype":"U8","shape":1,"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid entry"},
		{name: "shape_float", data: stFile(`{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid shape", want: "not an integer"},
		{name: "shape_exponent", data: stFile(`{"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid shape"},
		{name: "shape_string", data: stFile(`{"a":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid shape"},
		{name: "shape_nested", data: stFile(`{"a":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}}`, []byte{1}), kind: "invalid shape"},
		{name: "shape_negative", data: stFile(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, nil), kind: "invalid shape", want: "negative"},
		{name: "shape_negative_pair", data: stFile(`{"a":{"dtype":"U8","shape":[-2,-2],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "invalid shape"},
		{name: "shape_dim_too_big", data: stFile(`{"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}}`, []byte{1}), kind: "shape overflow"},
		{name: "shape_bytes_overflow", data: stFile(`{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}}`, make([]byte, 8)), kind: "shape overflow"},
		{name: "offsets_not_array", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":{"0":1}}}`, []byte{1}), kind: "invalid offsets"},
		{name: "offsets_one", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1]}}`, []byte{1}), kind: "invalid offsets", want: "1 entries"},
		{name: "offsets_three", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}}`, []byte{1}), kind: "invalid offsets", want: "has 3 entries"},
		{name: "offsets_negative", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}`, []byte{1}), kind: "invalid offsets"},
		{name: "offsets_float", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1.0]}}`, []byte{1}), kind: "invalid offsets"},
		{name: "offsets_huge", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551615]}}`, []byte{1}), kind: "invalid offsets", want: "int64"},

		// Dtypes.
		{name: "dtype_unknown", data: stFile(`{"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "unknown dtype", want: `"F31"`},
		{name: "dtype_lowercase", data: stFile(`{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "unknown dtype"},
		{name: "dtype_torch_name", data: stFile(`{"a":{"dtype":"float32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "unknown dtype"},
		{name: "subbyte_f4", data: stFile(`{"a":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}`, []byte{1})},
		{name: "subbyte_f6_e2m3", data: stFile(`{"a":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}`, make([]byte, 3))},
		{name: "subbyte_f6_e3m2", data: stFile(`{"a":{"dtype":"F6_E3M2","shape":[4],"data_offsets":[0,3]}}`, make([]byte, 3))},
		{name: "subbyte_f4_odd", data: stFile(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, make([]byte, 2)), kind: "size mismatch", want: "shape [3] x F4 (4 bits each) is 12 bits, not a whole number of bytes"},
		{name: "subbyte_f6_two", data: stFile(`{"a":{"dtype":"F6_E2M3","shape":[2],"data_offsets":[0,2]}}`, make([]byte, 2)), kind: "size mismatch", want: "shape [2] x F6_E2M3 (6 bits each) is 12 bits, not a whole number of bytes"},
		{name: "subbyte_f4_bytes", data: stFile(`{"a":{"dtype":"F4","shape":[4],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "size mismatch", want: "shape [4] x F4 (4 bits each) is 2 bytes, but data_offsets [0, 4] hold 4 bytes"},
		// B16 (d): an unknown dtype still gets its offsets checked; with good offsets the dtype is named.
		{name: "b16d_q3k_past_end", data: stFile(`{"q":{"dtype":"Q3_K","shape":[256],"data_offsets":[0,999999]}}`, make([]byte, 4)), kind: "range past end", want: `tensor "q": data_offsets [0, 999999] end past the end of the data section (4 bytes)`},
		{name: "b16d_q3k_in_range", data: stFile(`{"q":{"dtype":"Q3_K","shape":[256],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "unknown dtype", want: `tensor "q": dtype "Q3_K" is not a safetensors dtype`},

		// B13: shape vs data_offsets.
		{name: "b13a_shape_too_big", data: stFile(`{"t":{"dtype":"F32","shape":[1000,1000],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "size mismatch", want: "is 4000000 bytes, but data_offsets [0, 4] hold 4 bytes"},
		{name: "b13b_too_many_bytes", data: stFile(`{"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,20]}}`, make([]byte, 20)), kind: "size mismatch", want: "is 16 bytes"},
		{name: "b13c_overflow", data: stFile(`{"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}}`, make([]byte, 16)), kind: "shape overflow", want: `tensor "t"`},
		{name: "b13c_overflow_then_zero", data: stFile(`{"t":{"dtype":"U8","shape":[4611686018427387904,4,0],"data_offsets":[0,0]}}`, nil), kind: "shape overflow"},
		{name: "b13d_reversed", data: stFile(`{"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}`, make([]byte, 8)), kind: "invalid offsets", want: "begin is after end"},
		{name: "b13d_past_end", data: stFile(`{"t":{"dtype":"F32","shape":[1000000],"data_offsets":[0,4000000]}}`, make([]byte, 4)), kind: "range past end"},
		// B15 (e): a one-element tensor with no bytes.
		{name: "b15e_bad_empty", data: stFile(`{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"bad":{"dtype":"F32","shape":[1],"data_offsets":[0,0]}}`, f32s(1)), kind: "size mismatch", want: `tensor "bad"`},
		{name: "zero_shape_with_bytes", data: stFile(`{"t":{"dtype":"F32","shape":[0],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "size mismatch"},

		// Tiling of the data section.
		{name: "overlap", data: stFile(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}}`, make([]byte, 12)), kind: "overlapping tensors", want: `tensor "b" data_offsets [4, 12] overlaps tensor "a" [0, 8]`},
		{name: "overlap_same_range", data: stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), kind: "overlapping tensors"},
		{name: "overlap_empty_inside", data: stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"e":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}}`, make([]byte, 4)), kind: "overlapping tensors"},
		{name: "gap_start", data: stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}`, make([]byte, 8)), kind: "gap between tensors", want: "starts with 4 unused bytes"},
		{name: "gap_middle", data: stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}}`, make([]byte, 12)), kind: "gap between tensors", want: `between tensor "a" (ends at 4) and tensor "b"`},
		{name: "gap_only_empty", data: stFile(`{"e":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}}`, make([]byte, 2)), kind: "gap between tensors"},
		{name: "trailing_data", data: stFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, make([]byte, 8)), kind: "file length mismatch", want: "must equal 8 + header"},
		{name: "empty_with_data", data: stFile(`{}`, make([]byte, 4)), kind: "file length mismatch"},
		{name: "metadata_only_with_data", data: stFile(`{"__metadata__":{"a":"b"}}`, []byte{0}), kind: "file length mismatch"},

		// Duplicates, caught while parsing.
		{name: "duplicate_name", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, make([]byte, 2)), kind: "duplicate", want: `at offset 61: duplicate: tensor "a" appears twice`},
		{name: "duplicate_name_escaped", data: stFile(`{"ab":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"\u0061\u0062":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, make([]byte, 2)), kind: "duplicate", want: `"ab"`},
		{name: "duplicate_name_same_entry", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1)), kind: "duplicate"},
		{name: "duplicate_metadata_section", data: stFile(`{"__metadata__":{"a":"b"},"__metadata__":{"c":"d"}}`, nil), kind: "duplicate", want: "__metadata__"},
		{name: "duplicate_metadata_key", data: stFile(`{"__metadata__":{"a":"b","a":"c"}}`, nil), kind: "duplicate", want: `metadata key "a"`},
		{name: "duplicate_field", data: stFile(`{"a":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}}`, []byte{1}), kind: "duplicate", want: `field "dtype" twice`},
		{name: "duplicate_offsets_field", data: stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"data_offsets":[0,1]}}`, []byte{1}), kind: "duplicate"},

		// __metadata__ must be string -> string.
		{name: "metadata_array", data: stFile(`{"__metadata__":["a"]}`, nil), kind: "invalid metadata"},
		{name: "metadata_string", data: stFile(`{"__metadata__":"x"}`, nil), kind: "invalid metadata"},
		{name: "metadata_number_value", data: stFile(`{"__metadata__":{"epoch":3}}`, nil), kind: "invalid metadata", want: `metadata key "epoch" is a number (3)`},
		{name: "metadata_null_value", data: stFile(`{"__metadata__":{"a":null}}`, nil), kind: "invalid metadata"},
		{name: "metadata_nested", data: stFile(`{"__metadata__":{"a":{"b":"c"}}}`, nil), kind: "invalid metadata"},
	}
}

// stAllDTypes builds a file with one [3] tensor per byte-aligned dtype, in
// reverse data order in the header.
func stAllDTypes() []byte {
	dts := []string{"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
		"I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"}
	var parts []string
	var off int
	for _, d := range dts {
		bits, _ := objects.SafetensorsDTypeBits(d)
		n := 3 * bits / 8
		parts = append(parts, fmt.Sprintf(`"t_%s":{"dtype":"%s","shape":[3],"data_offsets":[%d,%d]}`, d, d, off, off+n))
		off += n
	}
	slices.Reverse(parts)
	return stFile(stPad("{"+strings.Join(parts, ",")+"}"), make([]byte, off))
}

func stNames(s *objects.Safetensors) []string {
	out := make([]string, len(s.Tensors))
	for i, t := range s.Tensors {
		out[i] = t.Name
	}
	return out
}

// stCheckError checks err is a Format error whose message holds a known kind.
func stCheckError(t testing.TB, err error) {
	t.Helper()
	if errs.CodeOf(err) != errs.Format {
		t.Fatalf("code %v: %v", errs.CodeOf(err), err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "safetensors") {
		t.Fatalf("message %q does not start with safetensors", msg)
	}
	for _, k := range stKinds {
		if strings.Contains(msg, ": "+k+":") {
			return
		}
	}
	t.Fatalf("message %q names no known kind", msg)
}

// stCheckInvariants checks what every accepted file satisfies: the tensors
// tile [DataStart, FileSize) in order, each size matches its shape and dtype,
// names are unique and Index finds each.
func stCheckInvariants(t testing.TB, s *objects.Safetensors, fileSize int64) {
	t.Helper()
	if s.HeaderLen < 2 || s.DataStart != 8+s.HeaderLen || s.FileSize != fileSize || s.DataStart > fileSize {
		t.Fatalf("header %d data start %d file size %d (want %d)", s.HeaderLen, s.DataStart, s.FileSize, fileSize)
	}
	at := s.DataStart
	names := map[string]bool{}
	for i, tn := range s.Tensors {
		if tn.Begin != at || tn.End < tn.Begin {
			t.Fatalf("tensor %d %q [%d, %d) does not start at %d", i, tn.Name, tn.Begin, tn.End, at)
		}
		bits, ok := objects.SafetensorsDTypeBits(tn.DType)
		if !ok || bits != tn.ElemBits {
			t.Fatalf("tensor %q dtype %q bits %d", tn.Name, tn.DType, tn.ElemBits)
		}
		size := big.NewInt(int64(bits)) // in bits: elements x bits is whole bytes
		for _, d := range tn.Shape {
			if d < 0 {
				t.Fatalf("tensor %q shape %v", tn.Name, tn.Shape)
			}
			size.Mul(size, big.NewInt(d))
		}
		if size.Cmp(big.NewInt(8*(tn.End-tn.Begin))) != 0 {
			t.Fatalf("tensor %q shape %v x %s != %d bytes", tn.Name, tn.Shape, tn.DType, tn.End-tn.Begin)
		}
		if names[tn.Name] || s.Index(tn.Name) != i {
			t.Fatalf("tensor %q: duplicate or Index %d != %d", tn.Name, s.Index(tn.Name), i)
		}
		names[tn.Name] = true
		at = tn.End
	}
	if at != fileSize {
		t.Fatalf("tensors end at %d, file is %d bytes", at, fileSize)
	}
}

func stParse(data []byte, lim objects.SafetensorsLimits) (*objects.Safetensors, error) {
	return objects.ParseSafetensors(bytes.NewReader(data), int64(len(data)), lim)
}

// TestParseSafetensors_Cases runs every hand-built file.
func TestParseSafetensors_Cases(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range stCases() {
		if seen[c.name] {
			t.Fatalf("case %s twice", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			s, err := stParse(c.data, objects.SafetensorsLimits{})
			if c.kind == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				stCheckInvariants(t, s, int64(len(c.data)))
				if c.check != nil {
					c.check(t, s)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %q error, parsed %+v", c.kind, s)
			}
			stCheckError(t, err)
			if !strings.Contains(err.Error(), ": "+c.kind+":") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want kind %q and %q, got %v", c.kind, c.want, err)
			}
			t.Log(err)
		})
	}
}

// stCorpusEntry is one file's line in testdata/safetensors/expected.json.
type stCorpusEntry struct {
	Valid bool   `json:"valid"`
	Kind  string `json:"kind,omitempty"`
}

// TestSafetensorsCorpus keeps testdata/safetensors (the fuzz seeds) equal to
// stCases. MEMTIER_UPDATE_SAFETENSORS_CORPUS=1 rewrites it.
func TestSafetensorsCorpus(t *testing.T) {
	cases := stCases()
	expected := map[string]stCorpusEntry{}
	files := map[string][]byte{}
	for _, c := range cases {
		expected[c.name+".safetensors"] = stCorpusEntry{Valid: c.kind == "", Kind: c.kind}
		files[c.name+".safetensors"] = c.data
	}
	js, err := json.MarshalIndent(expected, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files["expected.json"] = append(js, '\n')
	if os.Getenv("MEMTIER_UPDATE_SAFETENSORS_CORPUS") == "1" {
		if err := os.RemoveAll(stCorpusDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(stCorpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(stCorpusDir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ents, err := os.ReadDir(stCorpusDir)
	if err != nil {
		t.Fatalf("%v (run with MEMTIER_UPDATE_SAFETENSORS_CORPUS=1 to generate)", err)
	}
	for _, e := range ents {
		want, ok := files[e.Name()]
		if !ok {
			t.Errorf("stale corpus file %s (rerun with MEMTIER_UPDATE_SAFETENSORS_CORPUS=1)", e.Name())
			continue
		}
		got, err := os.ReadFile(filepath.Join(stCorpusDir, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("corpus file %s differs from its case (rerun with MEMTIER_UPDATE_SAFETENSORS_CORPUS=1)", e.Name())
		}
		delete(files, e.Name())
	}
	for name := range files {
		t.Errorf("corpus file %s missing (rerun with MEMTIER_UPDATE_SAFETENSORS_CORPUS=1)", name)
	}
	// Every corpus file also parses through ParseSafetensorsFile as expected.
	for _, c := range cases {
		path := filepath.Join(stCorpusDir, c.name+".safetensors")
		s, err := objects.ParseSafetensorsFile(path, objects.SafetensorsLimits{})
		if (err == nil) != (c.kind == "") {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.kind)) {
			t.Errorf("%s: error lacks the path or kind: %v", path, err)
		}
		if err == nil {
			stCheckInvariants(t, s, int64(len(c.data)))
		}
	}
}

// stUnderLimit builds a valid header of U8 [1] tensors at consecutive offsets,
// as long as possible without passing limit, and returns it with its tensor
// count.
func stUnderLimit(limit int) (string, int) {
	var sb strings.Builder
	sb.WriteByte('{')
	n := 0
	for {
		part := fmt.Sprintf(`"layer.%07d.weight":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}`, n, n, n+1)
		if n > 0 {
			part = "," + part
		}
		if sb.Len()+len(part)+1 > limit {
			break
		}
		sb.WriteString(part)
		n++
	}
	sb.WriteByte('}')
	return sb.String(), n
}

// TestParseSafetensors_B12gLimit: with a 1 MiB limit, a header just under it
// parses and one just over fails with a message stating the limit.
func TestParseSafetensors_B12gLimit(t *testing.T) {
	const limit = 1 << 20
	lim := objects.SafetensorsLimits{MaxHeaderBytes: limit}
	under, n := stUnderLimit(limit)
	if len(under) > limit || len(under) < limit-100 {
		t.Fatalf("header %d bytes", len(under))
	}
	s, err := stParse(stFile(under, make([]byte, n)), lim)
	if err != nil || len(s.Tensors) != n {
		t.Fatalf("under: %v", err)
	}
	exact := under + strings.Repeat(" ", limit-len(under))
	if _, err := stParse(stFile(exact, make([]byte, n)), lim); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
	// One more tensor passes the limit.
	over := under[:len(under)-1] + fmt.Sprintf(`,"layer.%07d.weight":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}}`, n, n, n+1)
	for _, h := range []string{over, exact + " "} {
		_, err = stParse(stFile(h, make([]byte, n+1)), lim)
		stCheckError(t, err)
		if !strings.Contains(err.Error(), "header too large") || !strings.Contains(err.Error(), "limit of 1048576 bytes") {
			t.Fatalf("over: %v", err)
		}
	}
	// The default limit takes the over-1-MiB header.
	if _, err := stParse(stFile(over, make([]byte, n+1)), objects.SafetensorsLimits{}); err != nil {
		t.Fatalf("default limit: %v", err)
	}
}

// TestParseSafetensors_B12g200k parses a 200,000-tensor header (about 15 MB)
// and prints the time; B12 asks for under 5 s (not asserted: -race and shared
// machines vary).
func TestParseSafetensors_B12g200k(t *testing.T) {
	const n = 200_000
	var sb strings.Builder
	sb.WriteByte('{')
	sb.WriteString(`"__metadata__":{"format":"pt"}`)
	for i := range n {
		fmt.Fprintf(&sb, `,"model.layers.%06d.w":{"dtype":"BF16","shape":[1],"data_offsets":[%d,%d]}`, i, 2*i, 2*i+2)
	}
	sb.WriteByte('}')
	data := stFile(stPad(sb.String()), make([]byte, 2*n))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	s, err := stParse(data, objects.SafetensorsLimits{})
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil || len(s.Tensors) != n || s.Index("model.layers.123456.w") != 123456 {
		t.Fatalf("err %v", err)
	}
	stCheckInvariants(t, s, int64(len(data)))
	t.Logf("200k-tensor header: %.1f MB parsed in %v, %.1f MB allocated in all (%.1fx the header)",
		float64(len(data))/1e6, elapsed, float64(after.TotalAlloc-before.TotalAlloc)/1e6,
		float64(after.TotalAlloc-before.TotalAlloc)/float64(s.HeaderLen))
	fmt.Printf("B12(g): 200k-tensor header (%.1f MB) parsed in %v\n", float64(s.HeaderLen)/1e6, elapsed)
}

// zeroReaderAt claims a size and reads zeros after a prefix; it never holds
// the whole "file".
type zeroReaderAt struct{ prefix []byte }

func (z zeroReaderAt) ReadAt(p []byte, off int64) (int, error) {
	for i := range p {
		p[i] = 0
		if o := off + int64(i); o < int64(len(z.prefix)) {
			p[i] = z.prefix[o]
		}
	}
	return len(p), nil
}

// TestParseSafetensors_NoBigAllocation: bogus lengths (B12 b, c) are refused
// before any N-byte allocation, whatever the claimed file size.
func TestParseSafetensors_NoBigAllocation(t *testing.T) {
	for _, c := range []struct {
		n        uint64
		fileSize int64
		kind     string
	}{
		{100_000_001, 10, "header too large"},
		{100_000_001, 1 << 40, "header too large"},
		{math.MaxUint64, 1 << 62, "header too large"},
		{0x04034b50, 64, "invalid header length"},             // PK\x03\x04
		{99_999_999, 99_999_999 + 7, "invalid header length"}, // one byte short
	} {
		r := zeroReaderAt{binary.LittleEndian.AppendUint64(nil, c.n)}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := objects.ParseSafetensors(r, c.fileSize, objects.SafetensorsLimits{})
		runtime.ReadMemStats(&after)
		stCheckError(t, err)
		if !strings.Contains(err.Error(), c.kind) {
			t.Fatalf("n %d: %v", c.n, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 64<<10 {
			t.Fatalf("n %d: allocated %d bytes", c.n, d)
		}
	}
}

// TestParseSafetensors_DTypes: the 22 dtypes of the spec with their sizes;
// every one parses, the packed sub-byte ones (F4, F6_*) by their bits.
func TestParseSafetensors_DTypes(t *testing.T) {
	want := map[string]int{
		"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
		"F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
		"I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
	}
	if len(want) != 22 {
		t.Fatal(len(want))
	}
	for d, bits := range want {
		got, ok := objects.SafetensorsDTypeBits(d)
		if !ok || got != bits {
			t.Fatalf("%s: %d %v, want %d", d, got, ok, bits)
		}
		size := 4 * bits / 8
		s, err := stParse(stFile(fmt.Sprintf(`{"t":{"dtype":"%s","shape":[2,2],"data_offsets":[0,%d]}}`, d, size), make([]byte, size)),
			objects.SafetensorsLimits{})
		if err != nil || s.Tensors[0].ElemBits != bits || s.Tensors[0].DType != d {
			t.Fatalf("%s: %v", d, err)
		}
	}
	for _, d := range []string{"", "Q3_K", "F8", "bf16", "F8_E4M3FN", "U4", "I4", "C128", " F32"} {
		if _, ok := objects.SafetensorsDTypeBits(d); ok {
			t.Fatalf("%q known", d)
		}
	}
}

// TestParseSafetensors_B11Reparse (header part of B11 b, c): the replaced
// file's header is parsed afresh and w's range moves with the data start.
func TestParseSafetensors_B11Reparse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "S.safetensors")
	v1 := stFile(stPad(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`), f32s(1, 2, 3, 4))
	v2 := stFile(stPad(`{"__metadata__":{"format":"pt","note":"replaced version"},"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`), f32s(5, 6, 7, 8))
	var starts []int64
	for i, v := range [][]byte{v1, v2} {
		if err := os.WriteFile(path, v, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := objects.ParseSafetensorsFile(path, objects.SafetensorsLimits{})
		if err != nil {
			t.Fatal(err)
		}
		w := s.Tensors[s.Index("w")]
		want := f32s(float32(4*i+1), float32(4*i+2), float32(4*i+3), float32(4*i+4))
		if !bytes.Equal(v[w.Begin:w.End], want) {
			t.Fatalf("version %d: w = % x", i+1, v[w.Begin:w.End])
		}
		starts = append(starts, s.DataStart)
	}
	if starts[1]-starts[0] < 40 {
		t.Fatalf("data start %v did not shift", starts)
	}
	// Truncated under the header: a clear error.
	if err := os.Truncate(path, 20); err != nil {
		t.Fatal(err)
	}
	_, err := objects.ParseSafetensorsFile(path, objects.SafetensorsLimits{})
	stCheckError(t, err)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err = objects.ParseSafetensorsFile(path, objects.SafetensorsLimits{})
	stCheckError(t, err)
}

// TestParseSafetensors_Errors: arguments, IO failures and open failures keep
// their own codes.
func TestParseSafetensors_Errors(t *testing.T) {
	good := stFile(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1})
	if _, err := objects.ParseSafetensors(bytes.NewReader(good), -1, objects.SafetensorsLimits{}); errs.CodeOf(err) != errs.InvalidArg {
		t.Fatalf("negative size: %v", err)
	}
	if _, err := objects.ParseSafetensors(bytes.NewReader(good), int64(len(good)), objects.SafetensorsLimits{MaxHeaderBytes: -1}); errs.CodeOf(err) != errs.InvalidArg {
		t.Fatalf("negative limit: %v", err)
	}
	_, err := objects.ParseSafetensors(failingReader{good, 20}, int64(len(good)), objects.SafetensorsLimits{})
	if errs.CodeOf(err) != errs.IO || !errors.Is(err, syscall.EIO) {
		t.Fatalf("read error: %v", err)
	}
	// A reader shorter than the size it was given: an IO error, not a panic.
	_, err = objects.ParseSafetensors(bytes.NewReader(good[:30]), int64(len(good)), objects.SafetensorsLimits{})
	if errs.CodeOf(err) != errs.IO || !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("short reader: %v", err)
	}
	dir := t.TempDir()
	_, err = objects.ParseSafetensorsFile(filepath.Join(dir, "nope.safetensors"), objects.SafetensorsLimits{})
	if errs.CodeOf(err) != errs.NotFound || !strings.Contains(err.Error(), "nope.safetensors") {
		t.Fatalf("missing: %v", err)
	}
	if _, err = objects.ParseSafetensorsFile(dir, objects.SafetensorsLimits{}); errs.CodeOf(err) != errs.IsDir {
		t.Fatalf("dir: %v", err)
	}
	var nilS *objects.Safetensors
	if nilS.Index("a") != -1 || (&objects.Safetensors{Tensors: []objects.Tensor{{Name: "a"}}}).Index("a") != 0 {
		t.Fatal("Index without a parse")
	}
}

// TestParseSafetensors_Deterministic: the same header gives the same result
// and the same first error, whatever the map order.
func TestParseSafetensors_Deterministic(t *testing.T) {
	h := `{"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"c":{"dtype":"U8","shape":[1],"data_offsets":[3,4]}}`
	first := ""
	for range 20 {
		_, err := stParse(stFile(h, make([]byte, 4)), objects.SafetensorsLimits{})
		if err == nil {
			t.Fatal("parsed")
		}
		if first == "" {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("%v != %v", err, first)
		}
	}
	if !strings.Contains(first, `tensor "a" data_offsets [0, 1] overlaps tensor "b"`) {
		t.Fatal(first)
	}
}

// JSON white space before the header's '{' is accepted, as safetensors 0.8
// accepts it: the tensors and the data start are the same as without it.
func TestSafetensorsLeadingWhiteSpace(t *testing.T) {
	for _, pad := range []string{" ", "\n", " \t\r\n "} {
		body := pad + `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
		data := stFile(body, make([]byte, 8))
		st, err := objects.ParseSafetensors(bytes.NewReader(data), int64(len(data)), objects.SafetensorsLimits{})
		if err != nil {
			t.Fatalf("pad %q: %v", pad, err)
		}
		if len(st.Tensors) != 1 || st.Tensors[0].Name != "a" || st.DataStart != 8+int64(len(body)) {
			t.Fatalf("pad %q: %+v", pad, st)
		}
	}
}

// TestParseSafetensors_MetadataPresence is field case N01 at the parser: an
// empty "__metadata__" object is an empty, non-nil map (the reference gives
// {}), a missing or null one is nil (the reference gives None).
func TestParseSafetensors_MetadataPresence(t *testing.T) {
	cases := []struct {
		header string
		want   map[string]string // nil: no metadata object
	}{
		{`{}`, nil},
		{`{"__metadata__":null}`, nil},
		{`{"__metadata__":{}}`, map[string]string{}},
		{`{"__metadata__":{"format":"pt","a":"b"}}`, map[string]string{"format": "pt", "a": "b"}},
	}
	for _, c := range cases {
		s, err := stParse(stFile(stPad(c.header), nil), objects.SafetensorsLimits{})
		if err != nil {
			t.Fatalf("%s: %v", c.header, err)
		}
		if (s.Metadata == nil) != (c.want == nil) || !maps.Equal(s.Metadata, c.want) {
			t.Errorf("%s: Metadata = %#v, want %#v", c.header, s.Metadata, c.want)
		}
	}
}

// A sharded checkpoint's index.json passed as a shard: the error says it is
// JSON and where to load it (a fresh-user finding: the bare "header too
// large" text said nothing).
func TestSafetensorsIndexJSONIsNamed(t *testing.T) {
	js := []byte(`{"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}`)
	_, err := objects.ParseSafetensors(bytes.NewReader(js), int64(len(js)), objects.SafetensorsLimits{})
	want := "header too large: header length 7017841271895827067 is over the limit of 100000000 bytes; " +
		"the file starts with '{', so it is JSON, not safetensors (a sharded checkpoint's " +
		"*.safetensors.index.json? memtier.safetensors.load_model and load_into follow its weight_map)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want it to contain %q", err, want)
	}
}
