package retrieval

// PorterStem returns the Porter (1980) stem of a lowercase word, following
// Martin Porter's reference C implementation (the algorithm behind Lucene's
// PorterStemFilter). Words that are not plain ASCII letters are returned as
// they are.
func PorterStem(w string) string {
	if len(w) <= 2 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	s := porter{b: []byte(w), k: len(w) - 1}
	s.step1ab()
	if s.k > 0 {
		s.step1c()
		s.step2()
		s.step3()
		s.step4()
		s.step5()
	}
	return string(s.b[:s.k+1])
}

type porter struct {
	b    []byte
	k, j int
}

func (p *porter) cons(i int) bool {
	switch p.b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		if i == 0 {
			return true
		}
		return !p.cons(i - 1)
	}
	return true
}

// m counts the consonant-vowel sequences in b[0..j].
func (p *porter) m() int {
	n, i := 0, 0
	for {
		if i > p.j {
			return n
		}
		if !p.cons(i) {
			break
		}
		i++
	}
	i++
	for {
		for {
			if i > p.j {
				return n
			}
			if p.cons(i) {
				break
			}
			i++
		}
		i++
		n++
		for {
			if i > p.j {
				return n
			}
			if !p.cons(i) {
				break
			}
			i++
		}
		i++
	}
}

func (p *porter) vowelInStem() bool {
	for i := 0; i <= p.j; i++ {
		if !p.cons(i) {
			return true
		}
	}
	return false
}

func (p *porter) doublec(j int) bool {
	return j >= 1 && p.b[j] == p.b[j-1] && p.cons(j)
}

func (p *porter) cvc(i int) bool {
	if i < 2 || !p.cons(i) || p.cons(i-1) || !p.cons(i-2) {
		return false
	}
	switch p.b[i] {
	case 'w', 'x', 'y':
		return false
	}
	return true
}

func (p *porter) ends(s string) bool {
	l := len(s)
	if l > p.k+1 || s[l-1] != p.b[p.k] {
		return false
	}
	if string(p.b[p.k-l+1:p.k+1]) != s {
		return false
	}
	p.j = p.k - l
	return true
}

func (p *porter) setTo(s string) {
	p.b = append(p.b[:p.j+1], s...)
	p.k = p.j + len(s)
}

func (p *porter) r(s string) {
	if p.m() > 0 {
		p.setTo(s)
	}
}

func (p *porter) step1ab() {
	if p.b[p.k] == 's' {
		switch {
		case p.ends("sses"):
			p.k -= 2
		case p.ends("ies"):
			p.setTo("i")
		case p.b[p.k-1] != 's':
			p.k--
		}
	}
	if p.ends("eed") {
		if p.m() > 0 {
			p.k--
		}
	} else if (p.ends("ed") || p.ends("ing")) && p.vowelInStem() {
		p.k = p.j
		switch {
		case p.ends("at"):
			p.setTo("ate")
		case p.ends("bl"):
			p.setTo("ble")
		case p.ends("iz"):
			p.setTo("ize")
		case p.doublec(p.k):
			p.k--
			switch p.b[p.k] {
			case 'l', 's', 'z':
				p.k++
			}
		default:
			p.j = p.k
			if p.m() == 1 && p.cvc(p.k) {
				p.setTo("e")
			}
		}
	}
	p.b = p.b[:p.k+1]
}

func (p *porter) step1c() {
	if p.ends("y") && p.vowelInStem() {
		p.b[p.k] = 'i'
	}
}

func (p *porter) rules(pairs ...string) {
	for i := 0; i < len(pairs); i += 2 {
		if p.ends(pairs[i]) {
			p.r(pairs[i+1])
			return
		}
	}
}

func (p *porter) step2() {
	if p.k < 1 {
		return
	}
	switch p.b[p.k-1] {
	case 'a':
		p.rules("ational", "ate", "tional", "tion")
	case 'c':
		p.rules("enci", "ence", "anci", "ance")
	case 'e':
		p.rules("izer", "ize")
	case 'l':
		p.rules("bli", "ble", "alli", "al", "entli", "ent", "eli", "e", "ousli", "ous")
	case 'o':
		p.rules("ization", "ize", "ation", "ate", "ator", "ate")
	case 's':
		p.rules("alism", "al", "iveness", "ive", "fulness", "ful", "ousness", "ous")
	case 't':
		p.rules("aliti", "al", "iviti", "ive", "biliti", "ble")
	case 'g':
		p.rules("logi", "log")
	}
}

func (p *porter) step3() {
	switch p.b[p.k] {
	case 'e':
		p.rules("icate", "ic", "ative", "", "alize", "al")
	case 'i':
		p.rules("iciti", "ic")
	case 'l':
		p.rules("ical", "ic", "ful", "")
	case 's':
		p.rules("ness", "")
	}
}

func (p *porter) step4() {
	if p.k < 1 {
		return
	}
	found := false
	any := func(ss ...string) bool {
		for _, s := range ss {
			if p.ends(s) {
				return true
			}
		}
		return false
	}
	switch p.b[p.k-1] {
	case 'a':
		found = any("al")
	case 'c':
		found = any("ance", "ence")
	case 'e':
		found = any("er")
	case 'i':
		found = any("ic")
	case 'l':
		found = any("able", "ible")
	case 'n':
		found = any("ant", "ement", "ment", "ent")
	case 'o':
		if p.ends("ion") && p.j >= 0 && (p.b[p.j] == 's' || p.b[p.j] == 't') {
			found = true
		} else {
			found = any("ou")
		}
	case 's':
		found = any("ism")
	case 't':
		found = any("ate", "iti")
	case 'u':
		found = any("ous")
	case 'v':
		found = any("ive")
	case 'z':
		found = any("ize")
	}
	if found && p.m() > 1 {
		p.k = p.j
	}
}

func (p *porter) step5() {
	p.j = p.k
	if p.b[p.k] == 'e' {
		a := p.m()
		if a > 1 || (a == 1 && !p.cvc(p.k-1)) {
			p.k--
		}
	}
	if p.b[p.k] == 'l' && p.doublec(p.k) && p.m() > 1 {
		p.k--
	}
}
