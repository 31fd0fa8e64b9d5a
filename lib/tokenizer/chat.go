package tokenizer

import "fmt"

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatML builds Qwen-style ChatML prompts directly as ids:
//
//	<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\nprefill
//
// The ids equal HF's encoding of the rendered text, because the special
// tokens cut the text into parts that are encoded on their own. Ids the model
// generated are appended as they are, never decoded and encoded again.
type ChatML struct {
	t          *Tokenizer
	Start, End int   // <|im_start|>, <|im_end|>
	newline    []int // ids of "\n"
}

// ChatML returns the ChatML builder of a tokenizer that has <|im_start|> and
// <|im_end|> as plain added tokens (no lstrip/rstrip/single_word, which
// would move the boundaries the builder relies on).
func (t *Tokenizer) ChatML() (*ChatML, error) {
	c := &ChatML{t: t}
	for _, name := range []string{"<|im_start|>", "<|im_end|>"} {
		id, ok := t.tokToID[name]
		if !ok {
			return nil, fmt.Errorf("ChatML needs the added token %q, which this tokenizer lacks", name)
		}
		for _, a := range t.added {
			if a.ID == id && (a.LStrip || a.RStrip || a.SingleWord || a.Normalized) {
				return nil, fmt.Errorf("ChatML: %q has lstrip/rstrip/single_word/normalized set; not supported", name)
			}
		}
		if name == "<|im_start|>" {
			c.Start = id
		} else {
			c.End = id
		}
	}
	c.newline = t.Encode("\n")
	return c, nil
}

// Render returns the ids of a whole conversation, then, with
// addGenerationPrompt, "<|im_start|>assistant\n" and the prefill.
func (c *ChatML) Render(msgs []Message, addGenerationPrompt bool, prefill string) []int {
	var ids []int
	for _, m := range msgs {
		ids = c.AppendMessage(ids, m)
	}
	if addGenerationPrompt {
		ids = c.AppendGenerationPrompt(ids, prefill)
	}
	return ids
}

// AppendMessage appends "<|im_start|>role\ncontent<|im_end|>\n".
func (c *ChatML) AppendMessage(dst []int, m Message) []int {
	dst = append(dst, c.Start)
	dst = c.t.AppendEncode(dst, m.Role+"\n"+m.Content)
	dst = append(dst, c.End)
	return append(dst, c.newline...)
}

// AppendGenerationPrompt appends "<|im_start|>assistant\n" and prefill, the
// text the assistant turn is forced to start with (e.g. "<mem>").
func (c *ChatML) AppendGenerationPrompt(dst []int, prefill string) []int {
	dst = append(dst, c.Start)
	return c.t.AppendEncode(dst, "assistant\n"+prefill)
}

// AppendGenerated appends ids the model generated, unchanged.
func (c *ChatML) AppendGenerated(dst, generated []int) []int {
	return append(dst, generated...)
}

// CloseTurn ends the assistant turn that generated ids were appended to:
// <|im_end|> (unless the model already produced it) and "\n", so that the
// next AppendMessage starts a new turn.
func (c *ChatML) CloseTurn(dst []int) []int {
	if len(dst) == 0 || dst[len(dst)-1] != c.End {
		dst = append(dst, c.End)
	}
	return append(dst, c.newline...)
}
