// Package world is mempo's embedded default: a generated, seeded world of
// people, companies and cities, its passage corpus (facts plus distractor
// passages that mention the same entities), k-objective tasks of single-hop
// and two-hop lookups, a small byte-level BPE tokenizer built from the
// world's own text, a tiny Qwen2 model config sized to it, and a scripted
// expert that writes protocol-perfect demonstration trajectories for the
// SFT cold start (the role the paper's GPT-4.1 trajectories play).
//
// The world is built so that memory is necessary: no answer is in a prompt
// (every question names an entity and an attribute, never the value), the
// facts are only in the corpus, and a k-objective task needs at least k
// searches; under MemPO's keep-1 context only the previous step and its
// observation survive, so answers found earlier must be carried in <mem>
// until the final <answer>. People are split between training and test
// tasks, so a policy cannot pass the test by remembering training facts in
// its weights: it has to search.
package world

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/mempo/mempo/lib/tasks"
)

// Config sizes a world. The zero value is not usable; start from
// DefaultConfig.
type Config struct {
	Seed      uint64
	People    int
	Companies int
	Cities    int
	Products  int
	// TestShare is the share of people whose questions only appear in test
	// tasks.
	TestShare float64
	// TwoHop is the probability that a question is a two-hop question
	// ("the city of the employer of X").
	TwoHop float64
	// Distractors is the number of distractor passages per person; each
	// names the person together with a wrong value of the same kind as an
	// answer.
	Distractors int
	// MaxTurns bounds a task's searches: a task never needs more than
	// MaxTurns−1 lookups, so the expert can answer within the protocol's turn
	// limit (a two-hop question is made single-hop when it would not fit).
	MaxTurns int
	// FactSeed, when not zero, makes this a fact-shuffled variant of the
	// world of Seed: the same people, companies, cities and products (the
	// same names, the same held-out people, the same tokenizer and model
	// config) with every fact drawn again from FactSeed, its own corpus, and
	// its own draw of tasks. A person lives in one city in one variant and in
	// another in the next, so a model trained on demonstrations from several
	// variants cannot lower its loss by remembering facts: it has to copy the
	// value from the passage. Zero is the world itself.
	FactSeed uint64 `json:",omitempty"`
}

// DefaultConfig is the demo's world: a few thousand passages, indexed in a
// second. There are many more people than training tasks mention, so a
// model cannot get by on remembering who is where: the cheapest way to
// answer is to copy names from the question into the query and from the
// passages into memory, which is the skill the demo teaches.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, People: 1200, Companies: 60, Cities: 40, Products: 20,
		TestShare: 0.25, TwoHop: 0.4, Distractors: 2, MaxTurns: 16}
}

// Entity kinds.
const (
	KindPerson  = "person"
	KindCompany = "company"
	KindCity    = "city"
	KindProduct = "product"
)

// Attributes. A person has a city and an employer (a company); a company has
// a city and a product. Two-hop questions go through the employer.
var (
	PersonAttrs  = []string{"city", "employer"}
	CompanyAttrs = []string{"city", "product"}
)

// Fact is one (entity, attribute, value) triple, stated by one passage.
type Fact struct {
	Entity, Attr, Value string
}

// Passage is one corpus row in the wiki-18 layout: Contents is
// "\"Title\"\ntext".
type Passage struct {
	ID       string `json:"id"`
	Contents string `json:"contents"`
}

// World is a generated world.
type World struct {
	Cfg       Config
	People    []string
	Companies []string
	Cities    []string
	Products  []string
	// Facts by entity and attribute.
	Facts map[string]map[string]string
	// Test marks the people held out for test tasks.
	Test map[string]bool
	// Corpus is every passage, facts and distractors interleaved in a
	// seeded order.
	Corpus []Passage
}

// FactText is how a fact is stated in the corpus: "The city of Velmar is
// Oskaro." The expert reads answers back out of observations with the same
// template (see ReadFact).
func FactText(f Fact) string {
	return "The " + f.Attr + " of " + f.Entity + " is " + f.Value + "."
}

// The question and memory markers. A task numbers its questions "(1)",
// "(2)", …; the expert's memory files what it found for question i under
// "[i]". Each marker is one id of the world tokenizer (MarkerTokens), so that
// every name or value the policy has to write is the id after a marker it
// has just written: the query of question 2 starts "(2)" and goes on with the
// ids after "(2)" in the task, the answer starts "[1]" and goes on with the
// ids after "[1]" in the memory. Copying is then the plain "find the id you
// just wrote, write what followed it" that a two-layer transformer learns
// (an induction head), instead of a lookup that counts questions or matches
// the word after "of", which every question repeats.

// QuestionMarker is question i's marker in the task: "(2)".
func QuestionMarker(i int) string { return "(" + strconv.Itoa(i) + ")" }

// MemoryMarker is question i's marker in the expert's memory: "[2]".
func MemoryMarker(i int) string { return "[" + strconv.Itoa(i) + "]" }

// MaxMarker is the largest question number with marker tokens; a task never
// has more questions than turns.
const MaxMarker = 16

// MarkerTokens are the markers of questions 1 … MaxMarker, both kinds.
func MarkerTokens() []string {
	var out []string
	for i := 1; i <= MaxMarker; i++ {
		out = append(out, QuestionMarker(i), MemoryMarker(i))
	}
	return out
}

// Query is the search query of one lookup, as the expert writes it: a
// marker, the entity and the attribute, "(2) Kemi employer". A question's
// first lookup repeats the question's own start ("(2) Kemi employer city?"
// is looked up as "(2) Kemi employer"); the second lookup of a two-hop
// question repeats the memory entry that holds what is left of it ("[2]
// Travex city").
func Query(marker, entity, attr string) string { return marker + " " + entity + " " + attr }

// names draws n distinct pronounceable capitalised names from syllables,
// avoiding any already taken.
func names(r *rand.Rand, n int, taken map[string]bool, syll []string, parts int) []string {
	out := make([]string, 0, n)
	for len(out) < n {
		var b strings.Builder
		for i := 0; i < parts; i++ {
			b.WriteString(syll[r.IntN(len(syll))])
		}
		s := b.String()
		s = strings.ToUpper(s[:1]) + s[1:]
		if taken[s] {
			continue
		}
		taken[s] = true
		out = append(out, s)
	}
	return out
}

// People's names are two syllables from a large inventory (every consonant
// with every vowel: 75 of them), companies' and cities' two from a small
// one. A person's name is not one token of the world tokenizer but its two
// syllables (see TokenizerTexts), so a name is a two-id sequence to copy;
// with 75 syllables two names in one context rarely share one, so copying
// by matching the syllable just written is unambiguous.
var (
	personSyll  = cvSyllables("kvmtlnrsdbpgfzh", "aeiou")
	companySyll = []string{"zen", "tek", "kor", "vex", "dyn", "plex", "nor", "tra", "quo", "bri"}
	citySyll    = []string{"drel", "ton", "bras", "ko", "har", "wick", "mel", "ford", "os", "vik", "lun", "dale"}
	productSyll = []string{"lamps", "gears", "boats", "tiles", "ropes", "bells", "drums", "kites", "maps", "coats", "soaps", "pipes", "vases", "clocks", "bricks", "sails", "chairs", "glass", "paper", "salt"}
)

// cvSyllables is every consonant followed by every vowel.
func cvSyllables(consonants, vowels string) []string {
	var out []string
	for _, c := range consonants {
		for _, v := range vowels {
			out = append(out, string(c)+string(v))
		}
	}
	return out
}

// Generate builds the world for cfg; the same config always gives the same
// world.
func Generate(cfg Config) (*World, error) {
	if cfg.People < 4 || cfg.Companies < 2 || cfg.Cities < 2 || cfg.Products < 2 {
		return nil, fmt.Errorf("world: too small: %d people, %d companies, %d cities, %d products", cfg.People, cfg.Companies, cfg.Cities, cfg.Products)
	}
	if cfg.Products > len(productSyll) {
		return nil, fmt.Errorf("world: at most %d products", len(productSyll))
	}
	if cfg.MaxTurns < 2 {
		return nil, fmt.Errorf("world: max turns %d: want ≥ 2", cfg.MaxTurns)
	}
	if cfg.TestShare <= 0 || cfg.TestShare >= 1 {
		return nil, fmt.Errorf("world: test share %g: want (0, 1)", cfg.TestShare)
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x776f726c64))
	taken := map[string]bool{}
	w := &World{Cfg: cfg, Facts: map[string]map[string]string{}, Test: map[string]bool{}}
	w.People = names(r, cfg.People, taken, personSyll, 2)
	w.Companies = names(r, cfg.Companies, taken, companySyll, 2)
	w.Cities = names(r, cfg.Cities, taken, citySyll, 2)
	prods := append([]string(nil), productSyll...)
	r.Shuffle(len(prods), func(i, j int) { prods[i], prods[j] = prods[j], prods[i] })
	w.Products = prods[:cfg.Products]
	sort.Strings(w.Products)

	// rr draws the facts and the corpus: the world's own generator, or for a
	// variant (FactSeed ≠ 0) one of its own, after the same names and the
	// same held-out people.
	rr := r
	pick := func(xs []string) string { return xs[rr.IntN(len(xs))] }
	set := func(e, a, v string) {
		if w.Facts[e] == nil {
			w.Facts[e] = map[string]string{}
		}
		w.Facts[e][a] = v
	}
	drawFacts := func() {
		for _, c := range w.Companies {
			set(c, "city", pick(w.Cities))
			set(c, "product", pick(w.Products))
		}
		for _, p := range w.People {
			set(p, "city", pick(w.Cities))
			set(p, "employer", pick(w.Companies))
		}
	}
	drawFacts()
	nTest := int(float64(cfg.People)*cfg.TestShare + 0.5)
	for _, i := range r.Perm(cfg.People)[:nTest] {
		w.Test[w.People[i]] = true
	}
	if cfg.FactSeed != 0 {
		rr = rand.New(rand.NewPCG(cfg.Seed, 0x6661637473^cfg.FactSeed<<40))
		drawFacts()
	}

	// Fact passages, one fact each, titled by the entity.
	var corpus []Passage
	add := func(title, text string) {
		corpus = append(corpus, Passage{Contents: "\"" + title + "\"\n" + text})
	}
	for _, e := range append(append([]string(nil), w.People...), w.Companies...) {
		attrs := PersonAttrs
		if w.kind(e) == KindCompany {
			attrs = CompanyAttrs
		}
		for _, a := range attrs {
			add(e, FactText(Fact{e, a, w.Facts[e][a]}))
		}
	}
	// Distractors: the same entity with a wrong value of an answer's kind,
	// in sentences that share the question's words ("city", "employer"), so
	// retrieval puts them beside the fact and the policy has to read which
	// passage states the fact.
	other := func(xs []string, not string) string {
		for {
			if x := pick(xs); x != not {
				return x
			}
		}
	}
	personTpl := []func(p string) string{
		func(p string) string {
			return p + " once travelled from the city of " + other(w.Cities, w.Facts[p]["city"]) + " to a fair."
		},
		func(p string) string {
			return "A friend of " + p + " named " + other(w.Companies, w.Facts[p]["employer"]) + " as the best employer of the year."
		},
		func(p string) string {
			return p + " wrote a letter to " + pick(w.People) + " about the city of " + other(w.Cities, w.Facts[p]["city"]) + "."
		},
		func(p string) string {
			return "The employer " + other(w.Companies, w.Facts[p]["employer"]) + " once offered " + p + " a job."
		},
	}
	for _, p := range w.People {
		for _, i := range rr.Perm(len(personTpl))[:min(cfg.Distractors, len(personTpl))] {
			add(p, personTpl[i](p))
		}
	}
	for _, c := range w.Companies {
		add(c, c+" sold "+other(w.Products, w.Facts[c]["product"])+" for one year in the city of "+other(w.Cities, w.Facts[c]["city"])+".")
	}
	rr.Shuffle(len(corpus), func(i, j int) { corpus[i], corpus[j] = corpus[j], corpus[i] })
	for i := range corpus {
		corpus[i].ID = fmt.Sprintf("w%d", i)
	}
	w.Corpus = corpus
	return w, nil
}

func (w *World) kind(e string) string {
	for _, c := range w.Companies {
		if c == e {
			return KindCompany
		}
	}
	return KindPerson
}

// Question is one objective of a task: its text, gold answer and the
// lookups (attribute, entity) that answer it, in order. The second lookup of
// a two-hop question names the first lookup's answer.
type Question struct {
	Text    string
	Gold    string
	Lookups []Fact
}

// Single is the single-hop question about attr of person p, "Kemi city?".
func (w *World) Single(p, attr string) Question {
	v := w.Facts[p][attr]
	return Question{
		Text:    p + " " + attr + "?",
		Gold:    v,
		Lookups: []Fact{{p, attr, v}},
	}
}

// TwoHop is the question about attr of the employer of person p, "Kemi
// employer city?".
func (w *World) TwoHop(p, attr string) Question {
	c := w.Facts[p]["employer"]
	v := w.Facts[c][attr]
	return Question{
		Text:    p + " employer " + attr + "?",
		Gold:    v,
		Lookups: []Fact{{p, "employer", c}, {c, attr, v}},
	}
}

// Numbered is the i-th question of a task as the task states it: "(2) Kemi
// city?" (the city of Kemi) or "(2) Kemi employer city?" (the city of Kemi's
// employer): the marker, the person, then the path of attributes to follow.
// The name comes right after the marker, so the query copies the question
// from its marker on (see QuestionMarker).
func Numbered(i int, text string) string { return QuestionMarker(i) + " " + text }

// Split names a task set.
type Split string

// Splits.
const (
	Train Split = "train"
	Test  Split = "test"
)

// Tasks draws n k-objective tasks of the split. Each task asks about k
// distinct people of the split; each question is two-hop with probability
// TwoHop. stream separates independent draws of the same split and k (the
// SFT demonstrations and the RL prompts, say).
func (w *World) Tasks(split Split, k, n int, stream uint64) ([]tasks.Task, [][]Question, error) {
	var pool []string
	for _, p := range w.People {
		if w.Test[p] == (split == Test) {
			pool = append(pool, p)
		}
	}
	if k < 1 || k > len(pool) || k > w.Cfg.MaxTurns-1 {
		return nil, nil, fmt.Errorf("world: k = %d objectives with %d %s people", k, len(pool), split)
	}
	salt := uint64(1)
	if split == Test {
		salt = 2
	}
	r := rand.New(rand.NewPCG(w.Cfg.Seed^0x7461736b^w.Cfg.FactSeed*0x9e3779b97f4a7c15, salt<<48|uint64(k)<<32|stream))
	out := make([]tasks.Task, 0, n)
	qs := make([][]Question, 0, n)
	for i := 0; i < n; i++ {
		perm := r.Perm(len(pool))[:k]
		t := tasks.Task{
			TaskID:     fmt.Sprintf("world%d%s/%s/k%d/%d-%d", w.Cfg.Seed, w.variant(), split, k, stream, i),
			DataSource: "world",
			K:          int32(k),
		}
		var tq []Question
		lookups := 0
		for j, pi := range perm {
			p := pool[pi]
			var q Question
			// Room for this two-hop question, the single-hop ones still to
			// come and the answer step.
			room := w.Cfg.MaxTurns - 1 - lookups - (k - j - 1)
			if r.Float64() < w.Cfg.TwoHop && room >= 2 {
				q = w.TwoHop(p, CompanyAttrs[r.IntN(len(CompanyAttrs))])
			} else {
				q = w.Single(p, PersonAttrs[r.IntN(len(PersonAttrs))])
			}
			lookups += len(q.Lookups)
			q.Text = Numbered(j+1, q.Text)
			tq = append(tq, q)
			t.Questions = append(t.Questions, q.Text)
			t.Golds = append(t.Golds, []string{q.Gold})
			t.SourceIDs = append(t.SourceIDs, fmt.Sprintf("%s#%d", t.TaskID, j))
		}
		t.Prompt = strings.Join(t.Questions, "; ")
		out = append(out, t)
		qs = append(qs, tq)
	}
	return out, qs, nil
}

// Texts is a sample of every kind of text the world's agents read and write
// (passages, questions, the expert's steps), for building the tokenizer.
func (w *World) Texts() []string {
	var out []string
	for _, p := range w.Corpus {
		out = append(out, p.Contents)
	}
	for i, p := range w.People {
		n := i%8 + 1
		for _, a := range PersonAttrs {
			q := w.Single(p, a)
			out = append(out, Numbered(n, q.Text), StepText(Step{Mem: MemEntry(n, q.Gold), Think: ThinkSearch(n), Query: Query(QuestionMarker(n), p, a)}))
		}
		for _, a := range CompanyAttrs {
			q := w.TwoHop(p, a)
			c := q.Lookups[0].Value
			out = append(out, Numbered(n, q.Text), StepText(Step{Mem: PendingEntry(n, c, a), Think: ThinkSecondHop(n), Query: Query(MemoryMarker(n), c, a)}))
		}
	}
	return out
}

// variant is "" for the world itself and "v<FactSeed>" for a fact-shuffled
// variant (task ids say which world they were drawn from).
func (w *World) variant() string {
	if w.Cfg.FactSeed == 0 {
		return ""
	}
	return "v" + strconv.FormatUint(w.Cfg.FactSeed, 10)
}
