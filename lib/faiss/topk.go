package faiss

import (
	"math"
	"sort"
)

func negInf() float64 { return math.Inf(-1) }

// topK keeps the k largest (score, id) pairs in a min-heap; ties keep the
// smaller id, as FAISS does.
type topK struct {
	k     int
	score []float32
	id    []int64
}

func (t *topK) less(i, j int) bool { // "worse" ordering for the min-heap root
	if t.score[i] != t.score[j] {
		return t.score[i] < t.score[j]
	}
	return t.id[i] > t.id[j]
}

func (t *topK) swap(i, j int) {
	t.score[i], t.score[j] = t.score[j], t.score[i]
	t.id[i], t.id[j] = t.id[j], t.id[i]
}

func (t *topK) push(s float32, id int64) {
	if len(t.score) < t.k {
		t.score = append(t.score, s)
		t.id = append(t.id, id)
		for i := len(t.score) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.less(i, p) {
				break
			}
			t.swap(i, p)
			i = p
		}
		return
	}
	if t.k == 0 || s < t.score[0] || (s == t.score[0] && id > t.id[0]) {
		return
	}
	t.score[0], t.id[0] = s, id
	n := len(t.score)
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && t.less(l, m) {
			m = l
		}
		if r < n && t.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		t.swap(i, m)
		i = m
	}
}

func (t *topK) sorted() ([]float32, []int64) {
	idx := make([]int, len(t.score))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if t.score[i] != t.score[j] {
			return t.score[i] > t.score[j]
		}
		return t.id[i] < t.id[j]
	})
	s := make([]float32, len(idx))
	id := make([]int64, len(idx))
	for o, i := range idx {
		s[o], id[o] = t.score[i], t.id[i]
	}
	return s, id
}
