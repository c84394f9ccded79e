// Package objects turns object-level descriptions into byte ranges of a data
// file. It holds the dataset index parser (a list of (offset, length) records,
// one per sample, that MemTierDataset reads through the engine) and the
// safetensors header parser (safetensors.go: tensor names, dtypes, shapes and
// absolute byte ranges, validated as the reference implementation does). The package is pure Go (stdlib and runtime/errs
// only), does no IO beyond the io.ReaderAt it is given (ParseIndexFile opens
// one file), holds no state and is safe for concurrent use.
//
// The Python package carries a second implementation of the same format
// (python/memtier/_index.py) so that a DataLoader's parent process never loads
// the Go runtime; tests/data/index_corpus/expected.json pins both parsers to
// the same results and the same error messages.
//
// # Index file format
//
// An index file lists the samples of a data file, in sample order. Sample k is
// the byte range [offset_k, offset_k+length_k) of the data file. Ranges may
// overlap, repeat, appear in any order and have length 0 (an empty sample).
// The file is one of two encodings, chosen by its first bytes: a file that
// starts with the NumPy magic "\x93NUMPY" is an .npy file, anything else is
// text.
//
// NumPy (.npy): format version 1.0, 2.0 or 3.0 of the NumPy file format
// (a 6-byte magic, 2 version bytes, a little-endian header length of 2 bytes
// in 1.0 or 4 bytes in 2.0/3.0, then the header, then the raw array). The
// header is a Python dict literal with exactly the keys 'descr',
// 'fortran_order' and 'shape'. The array must have:
//   - shape (N, 2), N >= 0: row k is (offset, length) of sample k;
//   - fortran_order False (C order: offset and length of a row are adjacent);
//   - descr '<i8', '<u8', '<i4' or '<u4' (little-endian 64- or 32-bit
//     integers). Big-endian, float, bool, object and structured dtypes are
//     refused.
//
// The header is at most 1 MiB. The body after it must hold exactly N rows:
// fewer bytes is a truncated file, more is trailing data; both are errors.
// The header literal is parsed by a small strict parser, not by a Python
// evaluator: strings in single or double quotes without escapes, decimal
// integers that fit in int64, True, False, None, tuples, lists and dicts,
// with spaces, tabs and newlines between tokens.
//
// Text: one record per line, "offset length", two decimal integers separated
// by spaces or tabs. Lines end with "\n" ("\r\n" is accepted). Leading and
// trailing spaces and tabs are ignored. Blank lines, and lines whose first
// character after leading spaces and tabs is '#', are skipped. A number is an
// optional '+' or '-' followed by ASCII digits; nothing else (no inline
// comments, no underscores, no hex, no third field) is allowed on a line.
// An empty file, or one with only comments, is a valid index with 0 records.
//
// # Validation
//
// The whole index is checked when it is opened; the first problem found is
// reported (in file order) as an *errs.Error with code errs.Format whose
// message names the 1-based line (text) or the 0-based row (npy):
//   - a value below 0 ("line 7: offset "-5" is negative");
//   - a value above the int64 maximum, whatever the dtype ("row 3: length
//     18446744073709551615 overflows int64");
//   - offset + length above the int64 maximum;
//   - a range that ends past the end of the data file ("row 2: range [96,
//     112) is past the end of the data file (100 bytes)"); a length-0 record
//     at offset == data size is valid;
//   - text: a line without exactly 2 fields, a field that is not a decimal
//     integer;
//   - npy: a malformed header or an unsupported version, a header over
//     1 MiB, wrong shape, dtype or order, a truncated body, trailing data.
//
// Tokens quoted in messages are cut at 32 bytes and escape every byte outside
// printable ASCII as \xNN, so a binary file gives a readable error.
package objects
