package world

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/mempo/mempo/lib/agent"
)

// Special and protocol tokens of the world tokenizer. The ChatML and
// end-of-text tokens are special (as in Qwen's tokenizer); the protocol tags
// are added tokens that are not special, so that every tag is one id and
// survives decoding with skip_special_tokens.
var (
	SpecialTokens  = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
	ProtocolTokens = []string{"<mem>", "</mem>", "<think>", "</think>", "<search>", "</search>",
		"<answer>", "</answer>", "<information>", "</information>", "<tool_call>", "</tool_call>"}
)

// InstructionPhrases are the fixed pieces of the protocol's text that the
// world tokenizer makes whole added tokens: the system prompt and the task
// instructions of lib/agent around the "{k}" and "{questions}" slots (with
// the default "search" tool tag). A from-scratch model cannot read English,
// so spelling these ~240 ids out would only cost it compute: with them as
// single ids every context is about 2.5 times shorter, which is what lets
// the demo train in minutes on two CPU cores. The text is unchanged (decode
// gives it back); token counts of the world model are in its own ids and are
// not comparable with a real tokenizer's.
func InstructionPhrases() []string {
	t := strings.ReplaceAll(agent.DefaultTaskPrompt, "{tool}", "search")
	out := []string{agent.Qwen25System}
	for _, part := range strings.FieldsFunc(strings.ReplaceAll(strings.ReplaceAll(t, "{k}", "\x00"), "{questions}", "\x00"), func(r rune) bool { return r == 0 }) {
		if len(part) > 1 {
			out = append(out, part)
		}
	}
	return out
}

// AddedTokens are every added token of the world tokenizer, in id order
// after the BPE vocabulary: SpecialTokens, ProtocolTokens, MarkerTokens,
// then InstructionPhrases.
func AddedTokens() []string {
	out := append(append([]string(nil), SpecialTokens...), ProtocolTokens...)
	return append(append(out, MarkerTokens()...), InstructionPhrases()...)
}

// bytesToUnicode is GPT-2's byte-to-character table of byte-level BPE: the
// printable Latin-1 bytes stand for themselves, the rest are moved to
// U+0100 and up.
func bytesToUnicode() [256]rune {
	var out [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			out[b] = rune(b)
		} else {
			out[b] = rune(256 + n)
			n++
		}
	}
	return out
}

// pretokRE splits text as the GPT-2 pattern of the ByteLevel pre-tokenizer
// does, except that runs of white space are not split before a word (Go's
// regexp has no look-ahead). Training on slightly different pieces only
// changes which merges are learned; encoding with the written tokenizer is
// lossless either way.
var pretokRE = regexp.MustCompile(`'s|'t|'re|'ve|'m|'ll|'d| ?\pL+| ?\pN+| ?[^\s\pL\pN]+|\s+`)

// TokenizerJSON trains a byte-level BPE on texts (weights give each text's
// count; nil means 1 each) and returns a Hugging Face tokenizer.json: the
// 256 byte symbols, up to maxMerges merges of pairs seen at least minFreq
// times, then AddedTokens. The layout
// (ByteLevel pre-tokenizer with the GPT-2 regex, ByteLevel decoder, no
// normalizer) is the one Qwen's tokenizer uses, so lib/tokenizer and HF
// tokenizers encode it the same way.
//
// Words in split (without their leading space) are not counted: they are
// encoded from whatever pieces the other texts made, never as one id. The
// world passes its people's names, so that a name the training tasks never
// mention is still made of pieces the model was trained on (see
// TokenizerTexts).
func TokenizerJSON(texts []string, weights []int, maxMerges, minFreq int, split map[string]bool) ([]byte, error) {
	b2u := bytesToUnicode()
	enc := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteRune(b2u[s[i]])
		}
		return b.String()
	}
	// Added tokens are matched before the model sees the text, so pieces
	// never span them.
	added := AddedTokens()
	splitter := make([]string, len(added))
	for i, a := range added {
		splitter[i] = regexp.QuoteMeta(a)
	}
	addedRE := regexp.MustCompile(strings.Join(splitter, "|"))
	counts := map[string]int{}
	for i, t := range texts {
		w := 1
		if weights != nil {
			w = weights[i]
		}
		for _, part := range addedRE.Split(t, -1) {
			for _, piece := range pretokRE.FindAllString(part, -1) {
				if split[strings.TrimPrefix(piece, " ")] {
					continue
				}
				counts[enc(piece)] += w
			}
		}
	}
	type word struct {
		syms []string
		n    int
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	words := make([]word, len(keys))
	for i, k := range keys {
		for _, r := range k {
			words[i].syms = append(words[i].syms, string(r))
		}
		words[i].n = counts[k]
	}
	vocab := map[string]int{}
	var order []string
	for b := 0; b < 256; b++ {
		s := string(b2u[b])
		vocab[s] = len(order)
		order = append(order, s)
	}
	var merges [][2]string
	for len(merges) < maxMerges {
		pairs := map[[2]string]int{}
		for _, w := range words {
			for j := 0; j+1 < len(w.syms); j++ {
				pairs[[2]string{w.syms[j], w.syms[j+1]}] += w.n
			}
		}
		var best [2]string
		bestN := 0
		for p, n := range pairs {
			// Ties go to the lexically smallest pair, so the result does
			// not depend on map order.
			if n > bestN || (n == bestN && (p[0] < best[0] || (p[0] == best[0] && p[1] < best[1]))) {
				best, bestN = p, n
			}
		}
		if bestN < minFreq {
			break
		}
		merged := best[0] + best[1]
		merges = append(merges, best)
		if _, ok := vocab[merged]; !ok {
			vocab[merged] = len(order)
			order = append(order, merged)
		}
		for i := range words {
			s := words[i].syms
			out := s[:0]
			for j := 0; j < len(s); j++ {
				if j+1 < len(s) && s[j] == best[0] && s[j+1] == best[1] {
					out = append(out, merged)
					j++
					continue
				}
				out = append(out, s[j])
			}
			words[i].syms = out
		}
	}
	type addedTok struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var at []addedTok
	for i, a := range added {
		at = append(at, addedTok{ID: len(order) + i, Content: a, Special: i < len(SpecialTokens)})
	}
	mergeStrs := make([][]string, len(merges))
	for i, m := range merges {
		mergeStrs[i] = []string{m[0], m[1]}
	}
	vocabOut := make(map[string]int, len(vocab))
	for k, v := range vocab {
		vocabOut[k] = v
	}
	doc := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   at,
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocabOut, "merges": mergeStrs,
		},
	}
	out, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return nil, fmt.Errorf("world: tokenizer: %w", err)
	}
	return append(out, '\n'), nil
}

// TokenizerConfigJSON is the tokenizer_config.json beside the world
// tokenizer: ChatML ends (<|im_end|> ends a turn, <|endoftext|> pads), no
// BOS, as Qwen2.5 instruct checkpoints ship it, and Qwen's chat template so
// transformers' apply_chat_template renders the same prompt lib/agent
// builds.
func TokenizerConfigJSON(vocabSize int) ([]byte, error) {
	dec := map[string]any{}
	for i, a := range AddedTokens() {
		dec[fmt.Sprint(vocabSize+i)] = map[string]any{"content": a, "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": i < len(SpecialTokens)}
	}
	doc := map[string]any{
		"tokenizer_class":              "Qwen2Tokenizer",
		"bos_token":                    nil,
		"eos_token":                    "<|im_end|>",
		"pad_token":                    "<|endoftext|>",
		"unk_token":                    nil,
		"model_max_length":             4096,
		"clean_up_tokenization_spaces": false,
		"added_tokens_decoder":         dec,
		"chat_template": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}" +
			"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
	}
	out, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
