package tokenizer

import (
	"fmt"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// byteChar is GPT-2's bytes_to_unicode table: each byte becomes a printable
// character, so byte-level BPE vocabularies are ordinary strings. charByte is
// its inverse.
var (
	byteChar [256]rune
	charByte = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteChar[b] = rune(b)
		} else {
			byteChar[b] = rune(256 + n)
			n++
		}
		charByte[byteChar[b]] = byte(b)
	}
}

// byteLevelString maps the bytes of s to the byte-level alphabet.
func byteLevelString(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteChar[s[i]])
	}
	return b.String()
}

// model turns one pre-token into ids. When byteLevel is set, piece is raw
// text that the ByteLevel pre-tokenizer would have mapped to its alphabet.
type model interface {
	tokenize(piece string, byteLevel bool, dst []int, sc *scratch) []int
	vocabulary() map[string]int
}

const noRank = ^uint32(0)

// bpeModel is HF's BPE model.
type bpeModel struct {
	vocab  map[string]int
	merges mergeTable
	// byteIDs[b] is the id of byte b's byte-level character, or -1.
	byteIDs             [256]int32
	allBytes            bool
	unk                 int // -1 without an unk token
	fuseUnk             bool
	byteFallback        bool
	ignoreMerges        bool
	prefix, suffix      string // continuing_subword_prefix, end_of_word_suffix
	cache               *bpeCache
	heapThreshold       int // words longer than this use the heap merge loop
	disableCacheForTest bool
}

func (m *bpeModel) vocabulary() map[string]int { return m.vocab }

func (m *bpeModel) init() {
	m.allBytes = m.prefix == "" && m.suffix == ""
	for b := 0; b < 256; b++ {
		if id, ok := m.vocab[string(byteChar[b])]; ok {
			m.byteIDs[b] = int32(id)
		} else {
			m.byteIDs[b] = -1
			m.allBytes = false
		}
	}
	m.cache = newBPECache(200_000)
	if m.heapThreshold == 0 {
		m.heapThreshold = 48
	}
}

// pair returns the rank and result of merging a and b, or noRank.
func (m *bpeModel) pair(a, b int32) (uint32, int32) {
	v, ok := m.merges.get(uint64(uint32(a))<<32 | uint64(uint32(b)))
	if !ok {
		return noRank, -1
	}
	return uint32(v >> 32), int32(uint32(v))
}

func (m *bpeModel) tokenize(piece string, byteLevel bool, dst []int, sc *scratch) []int {
	if piece == "" {
		return dst
	}
	if byteLevel && len(piece) <= 2 && m.allBytes && !m.ignoreMerges {
		// One or two bytes: at most one merge, cheaper than the cache.
		a := m.byteIDs[piece[0]]
		if len(piece) == 1 {
			return append(dst, int(a))
		}
		b := m.byteIDs[piece[1]]
		if r, nw := m.pair(a, b); r != noRank {
			return append(dst, int(nw))
		}
		return append(dst, int(a), int(b))
	}
	if !m.disableCacheForTest {
		if ids, ok := m.cache.get(piece); ok {
			for _, id := range ids {
				dst = append(dst, int(id))
			}
			return dst
		}
	}
	var word []int32
	if byteLevel && m.allBytes && !m.ignoreMerges {
		word = sc.word[:0]
		for i := 0; i < len(piece); i++ {
			word = append(word, m.byteIDs[piece[i]])
		}
	} else {
		s := piece
		if byteLevel {
			s = byteLevelString(piece)
		}
		if m.ignoreMerges {
			if id, ok := m.vocab[s]; ok {
				return append(dst, id)
			}
		}
		word = m.initialSymbols(s, sc.word[:0])
	}
	word = m.merge(word, sc)
	sc.word = word[:0]
	if len(piece) <= 256 && !m.disableCacheForTest {
		m.cache.put(piece, word)
	}
	for _, id := range word {
		dst = append(dst, int(id))
	}
	return dst
}

// initialSymbols splits a word into characters and looks them up, with HF's
// handling of subword prefixes, suffixes, byte fallback and unknowns.
func (m *bpeModel) initialSymbols(w string, word []int32) []int32 {
	pendingUnk := false
	flush := func() {
		if pendingUnk {
			word = append(word, int32(m.unk))
			pendingUnk = false
		}
	}
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRuneInString(w[i:])
		s := w[i : i+n]
		if m.prefix != "" && i > 0 {
			s = m.prefix + s
		}
		if m.suffix != "" && i+n == len(w) {
			s += m.suffix
		}
		i += n
		if id, ok := m.vocab[s]; ok {
			flush()
			word = append(word, int32(id))
			continue
		}
		if m.byteFallback {
			ids := make([]int32, 0, len(s))
			for k := 0; k < len(s); k++ {
				id, ok := m.vocab[fmt.Sprintf("<0x%02X>", s[k])]
				if !ok {
					ids = nil
					break
				}
				ids = append(ids, int32(id))
			}
			if ids != nil {
				flush()
				word = append(word, ids...)
				continue
			}
		}
		if m.unk >= 0 {
			// Without fuse_unk every unknown character is its own unk;
			// with it, a run of unknowns becomes one.
			if pendingUnk && !m.fuseUnk {
				word = append(word, int32(m.unk))
			}
			pendingUnk = true
		}
		// With no unk token HF drops the character.
	}
	flush()
	return word
}

// merge applies the merges to word by rank, lowest first, leftmost among
// equal ranks: the order of HF's priority queue.
func (m *bpeModel) merge(word []int32, sc *scratch) []int32 {
	if len(word) < 2 {
		return word
	}
	if len(word) > m.heapThreshold {
		return m.mergeHeap(word, sc)
	}
	ranks, news := sc.ranks[:0], sc.news[:0]
	for i := 0; i+1 < len(word); i++ {
		r, nw := m.pair(word[i], word[i+1])
		ranks = append(ranks, r)
		news = append(news, nw)
	}
	for {
		best, bi := noRank, -1
		for i, r := range ranks {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		word[bi] = news[bi]
		word = append(word[:bi+1], word[bi+2:]...)
		ranks = append(ranks[:bi], ranks[bi+1:]...)
		news = append(news[:bi], news[bi+1:]...)
		if bi > 0 {
			ranks[bi-1], news[bi-1] = m.pair(word[bi-1], word[bi])
		}
		if bi < len(word)-1 {
			ranks[bi], news[bi] = m.pair(word[bi], word[bi+1])
		}
	}
	sc.ranks, sc.news = ranks[:0], news[:0]
	return word
}

// mergeHeap is HF's Word::merge_all: a min-heap of candidate merges over a
// linked list of symbols, O(n log n) for long words.
func (m *bpeModel) mergeHeap(word []int32, sc *scratch) []int32 {
	n := len(word)
	prev := make([]int32, n)
	next := make([]int32, n)
	alive := make([]bool, n)
	for i := range word {
		prev[i], next[i], alive[i] = int32(i-1), int32(i+1), true
	}
	next[n-1] = -1
	h := mergeHeap(sc.heap[:0])
	for i := 0; i+1 < n; i++ {
		if r, nw := m.pair(word[i], word[i+1]); r != noRank {
			h.push(heapItem{r, int32(i), nw})
		}
	}
	for len(h) > 0 {
		top := h.pop()
		p := top.pos
		if !alive[p] || next[p] < 0 {
			continue
		}
		q := next[p]
		// Skip entries made stale by an earlier merge.
		if r, nw := m.pair(word[p], word[q]); r == noRank || nw != top.new {
			continue
		}
		word[p] = top.new
		alive[q] = false
		next[p] = next[q]
		if next[q] >= 0 {
			prev[next[q]] = p
		}
		if prev[p] >= 0 {
			if r, nw := m.pair(word[prev[p]], word[p]); r != noRank {
				h.push(heapItem{r, prev[p], nw})
			}
		}
		if next[p] >= 0 {
			if r, nw := m.pair(word[p], word[next[p]]); r != noRank {
				h.push(heapItem{r, p, nw})
			}
		}
	}
	sc.heap = h[:0]
	out := word[:0]
	for i := 0; i < n; i++ {
		if alive[i] {
			out = append(out, word[i])
		}
	}
	return out
}

type heapItem struct {
	rank uint32
	pos  int32
	new  int32
}

func (a heapItem) less(b heapItem) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeHeap is a binary min-heap of heapItems ordered by (rank, pos).
type mergeHeap []heapItem

func (h *mergeHeap) push(x heapItem) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() heapItem {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[small]) {
			small = l
		}
		if r < len(s) && s[r].less(s[small]) {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}

// bpeCache maps pre-tokens to their ids. Like HF's cache it stops growing
// at its limit rather than evicting, so it can be a fixed open-addressing
// table whose slots are only ever filled: readers take no lock (one atomic
// load per probe) and writers claim a free slot with a compare-and-swap.
type bpeCache struct {
	slots []atomic.Pointer[cacheEntry]
	shift uint
	n     atomic.Int64
	limit int64
}

// cacheEntry is immutable once published.
type cacheEntry struct {
	hash uint64
	key  string
	ids  []int32
}

var cacheSeed = maphash.MakeSeed()

func newBPECache(limit int) *bpeCache {
	bits := uint(4)
	for 1<<bits < 2*limit {
		bits++
	}
	return &bpeCache{slots: make([]atomic.Pointer[cacheEntry], 1<<bits), shift: 64 - bits, limit: int64(limit)}
}

func (c *bpeCache) get(k string) ([]int32, bool) {
	h := maphash.String(cacheSeed, k)
	mask := uint64(len(c.slots) - 1)
	for i := h >> c.shift; ; i = (i + 1) & mask {
		e := c.slots[i].Load()
		if e == nil {
			return nil, false
		}
		if e.hash == h && e.key == k {
			return e.ids, true
		}
	}
}

func (c *bpeCache) put(k string, ids []int32) {
	if c.n.Load() >= c.limit {
		return
	}
	h := maphash.String(cacheSeed, k)
	var e *cacheEntry
	mask := uint64(len(c.slots) - 1)
	for i := h >> c.shift; ; i = (i + 1) & mask {
		cur := c.slots[i].Load()
		if cur == nil {
			if e == nil {
				// Reserve room first, so the table never holds more than limit.
				if c.n.Add(1) > c.limit {
					c.n.Add(-1)
					return
				}
				e = &cacheEntry{hash: h, key: strings.Clone(k), ids: append([]int32(nil), ids...)}
			}
			if c.slots[i].CompareAndSwap(nil, e) {
				return
			}
			cur = c.slots[i].Load() // another writer took this slot
		}
		if cur.hash == h && cur.key == k {
			if e != nil {
				c.n.Add(-1)
			}
			return
		}
	}
}

// wordLevelModel is HF's WordLevel model: one vocabulary lookup per
// pre-token, unknown words become the unk token.
type wordLevelModel struct {
	vocab map[string]int
	unk   int
}

func (m *wordLevelModel) vocabulary() map[string]int { return m.vocab }

func (m *wordLevelModel) tokenize(piece string, byteLevel bool, dst []int, _ *scratch) []int {
	if byteLevel {
		piece = byteLevelString(piece)
	}
	if id, ok := m.vocab[piece]; ok {
		return append(dst, id)
	}
	return append(dst, m.unk)
}

// mergeTable maps a merge's pair (a<<32|b) to rank<<32|new id. It is an
// open-addressing table with linear probing, half full at most: a lookup
// usually touches one cache line, where a Go map of 151k entries touches
// several (the merge loop spends most of its time in these lookups).
type mergeTable struct {
	slots []mergeSlot
	shift uint
	n     int
}

type mergeSlot struct{ key, val uint64 }

// emptyKey marks a free slot; pair keys have ids below 2^31 on both halves.
const emptyKey = ^uint64(0)

func newMergeTable(n int) mergeTable {
	bits := uint(4)
	for 1<<bits < 2*n {
		bits++
	}
	t := mergeTable{slots: make([]mergeSlot, 1<<bits), shift: 64 - bits}
	for i := range t.slots {
		t.slots[i].key = emptyKey
	}
	return t
}

func (t *mergeTable) index(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> t.shift }

// set inserts or replaces (a later duplicate merge wins, as in HF's map).
func (t *mergeTable) set(key, val uint64) {
	mask := uint64(len(t.slots) - 1)
	for i := t.index(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == emptyKey {
			s.key, s.val = key, val
			t.n++
			return
		}
		if s.key == key {
			s.val = val
			return
		}
	}
}

func (t *mergeTable) get(key uint64) (uint64, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := t.index(key); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s.key == key {
			return s.val, true
		}
		if s.key == emptyKey {
			return 0, false
		}
	}
}
