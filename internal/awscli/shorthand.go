package awscli

import (
	"fmt"
	"os"
	"strings"
)

// This file is a port of the AWS CLI's shorthand syntax (awscli/shorthand.py), so that
// `--tags Key=team,Value=llm`, `--vpc-config SecurityGroupIds=sg-1,Subnets=subnet-1,subnet-2`
// and `--foo A={B=1,C=[x,y]}` mean what they mean to `aws`. The parser is purely syntactic;
// shorthandToModel then applies the model the way the CLI's BackCompatVisitor does.

// shorthandError is a shorthand syntax error, with the input and a caret at the position.
type shorthandError struct {
	msg   string
	input string
	index int
}

func (e *shorthandError) Error() string {
	consumed, remaining, spaces := e.input, "", e.index
	if i := strings.LastIndexByte(e.input[:e.index], '\n'); i >= 0 {
		spaces = e.index - i - 1
	}
	if i := strings.IndexByte(e.input[e.index:], '\n'); i >= 0 {
		consumed, remaining = e.input[:e.index+i], e.input[e.index+i:]
	}
	return fmt.Sprintf("%s for input:\n%s\n%s^%s", e.msg, consumed, strings.Repeat(" ", spaces), remaining)
}

type shorthandParser struct {
	in          []rune
	i           int
	resolveFile bool // the key was written key@=..., so a file:// value is read
}

// parseShorthand parses one shorthand value into an *object of strings, lists and objects.
func parseShorthand(s string) (*object, error) {
	p := &shorthandParser{in: []rune(s)}
	return p.parameter()
}

func (p *shorthandParser) fail(expected string, at int) error {
	actual := "EOF"
	if at < len(p.in) {
		actual = string(p.in[at])
	}
	return &shorthandError{msg: fmt.Sprintf("Expected: '%s', received: '%s'", expected, actual), input: string(p.in), index: len(string(p.in[:at]))}
}

func (p *shorthandParser) parameter() (*object, error) {
	params := newObject()
	k, v, err := p.keyval()
	if err != nil {
		return nil, err
	}
	params.set(k, v)
	last := p.i
	for p.i < len(p.in) {
		if err := p.expect(',', true); err != nil {
			return nil, err
		}
		k, v, err := p.keyval()
		if err != nil {
			return nil, err
		}
		if _, dup := params.get(k); dup {
			e := &shorthandError{msg: fmt.Sprintf("Second instance of key %q encountered", k), input: string(p.in), index: len(string(p.in[:last+1]))}
			return nil, fmt.Errorf("%w\nThis is often because there is a preceding \",\" instead of a space.", e)
		}
		params.set(k, v)
		last = p.i
	}
	return params, nil
}

func (p *shorthandParser) keyval() (string, any, error) {
	k := p.key()
	p.resolveFile = p.expect('@', true) == nil
	if err := p.expect('=', true); err != nil {
		return "", nil, err
	}
	v, err := p.values()
	return k, v, err
}

func (p *shorthandParser) key() string {
	start := p.i
	for p.i < len(p.in) && isKeyChar(p.in[p.i]) {
		p.i++
	}
	return string(p.in[start:p.i])
}

func isKeyChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.#/:", r)
}

func (p *shorthandParser) values() (any, error) {
	switch p.current() {
	case eof:
		return "", nil
	case '[':
		return p.explicitList()
	case '{':
		return p.hashLiteral()
	}
	return p.csvValue()
}

// csvValue reads "a" or "a,b,c" (a list); a comma that turns out to start the next key=value
// ends the list.
func (p *shorthandParser) csvValue() (any, error) {
	first, err := p.firstValue()
	if err != nil {
		return nil, err
	}
	p.consumeSpace()
	if p.i >= len(p.in) || p.in[p.i] != ',' {
		return first, nil
	}
	if err := p.expect(',', true); err != nil {
		return nil, err
	}
	list := []any{first}
	for {
		cur, err := p.secondValue()
		if err == nil {
			p.consumeSpace()
			if p.i >= len(p.in) {
				list = append(list, cur)
				break
			}
			err = p.expect(',', true)
			if err == nil {
				list = append(list, cur)
				continue
			}
		}
		if p.i >= len(p.in) {
			return nil, err
		}
		p.backtrackTo(',')
		break
	}
	if len(list) == 1 {
		return first, nil
	}
	return list, nil
}

func (p *shorthandParser) explicitList() (any, error) {
	if err := p.expect('[', true); err != nil {
		return nil, err
	}
	list := []any{}
	for p.current() != ']' {
		v, err := p.explicitValues()
		if err != nil {
			return nil, err
		}
		list = append(list, v)
		p.consumeSpace()
		if p.current() != ']' {
			if err := p.expect(',', false); err != nil {
				return nil, err
			}
			p.consumeSpace()
		}
	}
	if err := p.expect(']', false); err != nil {
		return nil, err
	}
	return list, nil
}

func (p *shorthandParser) explicitValues() (any, error) {
	switch p.current() {
	case '[':
		return p.explicitList()
	case '{':
		return p.hashLiteral()
	}
	return p.firstValue()
}

func (p *shorthandParser) hashLiteral() (any, error) {
	if err := p.expect('{', true); err != nil {
		return nil, err
	}
	o := newObject()
	for p.current() != '}' {
		k := p.key()
		p.resolveFile = p.expect('@', true) == nil
		if err := p.expect('=', true); err != nil {
			return nil, err
		}
		v, err := p.explicitValues()
		if err != nil {
			return nil, err
		}
		p.consumeSpace()
		if p.current() != '}' {
			if err := p.expect(',', false); err != nil {
				return nil, err
			}
			p.consumeSpace()
		}
		o.set(k, v)
	}
	if err := p.expect('}', false); err != nil {
		return nil, err
	}
	return o, nil
}

func (p *shorthandParser) firstValue() (any, error) {
	switch p.current() {
	case '\'', '"':
		return p.quoted(p.current())
	}
	v := p.word(isFirstFollow)
	return p.resolve(strings.TrimRight(v, " \t\n\r\f\v"))
}

func (p *shorthandParser) secondValue() (any, error) {
	switch p.current() {
	case '\'', '"':
		return p.quoted(p.current())
	}
	start := p.i
	v := p.word(isSecondFollow)
	if p.i == start {
		return nil, p.fail("<second>", p.i)
	}
	return p.resolve(strings.TrimRight(v, " \t\n\r\f\v"))
}

// word consumes a start character and then follow characters; "\," is an escaped comma
// anywhere in it.
func (p *shorthandParser) word(follow func(rune) bool) string {
	var b strings.Builder
	first := true
	for p.i < len(p.in) {
		r := p.in[p.i]
		if r == '\\' && p.i+1 < len(p.in) && p.in[p.i+1] == ',' {
			b.WriteRune(',')
			p.i += 2
		} else if first && isStartWord(r) || !first && follow(r) {
			b.WriteRune(r)
			p.i++
		} else {
			break
		}
		first = false
	}
	return b.String()
}

// The character classes of shorthand.py's _START_WORD, _FIRST_FOLLOW_CHARS and
// _SECOND_FOLLOW_CHARS.
func isStartWord(r rune) bool {
	return r == '!' || r >= '#' && r <= '&' || r >= '(' && r <= '+' || r >= '-' && r <= '<' ||
		r >= '>' && r <= 'Z' || r >= '\\' && r <= 'z' || r >= '|'
}

func isFirstFollow(r rune) bool {
	return isSpace(r) || r == '!' || r >= '#' && r <= '&' || r >= '(' && r <= '+' || r >= '-' && r <= '\\' ||
		r >= '^' && r <= '|' || r >= '~'
}

func isSecondFollow(r rune) bool {
	return isSpace(r) || r == '!' || r >= '#' && r <= '&' || r >= '(' && r <= '+' || r >= '-' && r <= '<' || r >= '>'
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v'
}

// quoted reads a '...' or "..." value; \q is an escaped quote and \\ a backslash.
func (p *shorthandParser) quoted(q rune) (any, error) {
	start := p.i
	j := p.i + 1
	for j < len(p.in) {
		if p.in[j] == '\\' && j+1 < len(p.in) && p.in[j+1] == q {
			j += 2
			continue
		}
		if p.in[j] == q {
			break
		}
		j++
	}
	if j >= len(p.in) {
		// The regex would backtrack and close at the last quote that an escape had taken.
		j = -1
		for k := len(p.in) - 1; k > start; k-- {
			if p.in[k] == q {
				j = k
				break
			}
		}
		if j < 0 {
			name := "double quoted"
			if q == '\'' {
				name = "singled quoted"
			}
			return nil, p.fail("<"+name+">", start)
		}
	}
	v := string(p.in[start+1 : j])
	p.i = j + 1
	v = strings.ReplaceAll(v, `\`+string(q), string(q))
	v = strings.ReplaceAll(v, `\\`, `\`)
	return p.resolve(v)
}

// resolve reads file:// values of keys written key@=..., as the CLI does.
func (p *shorthandParser) resolve(v string) (any, error) {
	if !p.resolveFile || !strings.HasPrefix(v, "file://") {
		return v, nil
	}
	b, err := os.ReadFile(expandHome(strings.TrimPrefix(v, "file://")))
	if err != nil {
		return nil, fmt.Errorf("Unable to load paramfile %s: %v", v, err)
	}
	return string(b), nil
}

const eof = rune(-1)

func (p *shorthandParser) current() rune {
	if p.i < len(p.in) {
		return p.in[p.i]
	}
	return eof
}

func (p *shorthandParser) expect(c rune, space bool) error {
	if space {
		p.consumeSpace()
	}
	if p.i >= len(p.in) || p.in[p.i] != c {
		return p.fail(string(c), p.i)
	}
	p.i++
	if space {
		p.consumeSpace()
	}
	return nil
}

func (p *shorthandParser) backtrackTo(c rune) {
	for p.i >= 0 && (p.i >= len(p.in) || p.in[p.i] != c) {
		p.i--
	}
}

func (p *shorthandParser) consumeSpace() {
	for p.i < len(p.in) && isSpace(p.in[p.i]) {
		p.i++
	}
}
