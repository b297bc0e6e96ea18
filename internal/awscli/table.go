package awscli

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file is a port of the AWS CLI's table output (awscli/formatter.py TableFormatter and
// awscli/table.py MultiTable, without colour), so that `--output table` draws the same boxes:
// the operation name as the title, a dict's scalars as a row under their sorted keys (or as
// key/value rows when the table is wider than the terminal), a list of structures as a table
// with the union of their scalar keys as columns, and nested values as indented sections.

type tableSection struct {
	title     string
	headers   []string
	rows      [][]string
	indent    int
	maxWidths []int
}

func (s *tableSection) updateWidths(row []string) {
	if len(s.maxWidths) == 0 {
		s.maxWidths = make([]int, len(row))
		for i, c := range row {
			s.maxWidths[i] = textLen(c)
		}
		return
	}
	for i, c := range row {
		if i < len(s.maxWidths) && textLen(c) > s.maxWidths[i] {
			s.maxWidths[i] = textLen(c)
		}
	}
}

func (s *tableSection) addHeader(h []string) {
	s.updateWidths(h)
	s.headers = h
}

func (s *tableSection) addRow(r []string) {
	s.rows = append(s.rows, r)
	s.updateWidths(r)
}

// columnWidths scales the columns (each padded by padding) to fill maxWidth, as
// Section.calculate_column_widths does; maxWidth < 0 means unscaled.
func (s *tableSection) columnWidths(padding, maxWidth int) []int {
	unscaled := make([]int, len(s.maxWidths))
	sum := 0
	for i, w := range s.maxWidths {
		unscaled[i] = w + padding
		sum += unscaled[i]
	}
	if maxWidth < 0 || len(unscaled) == 0 {
		return unscaled
	}
	scale := float64(maxWidth) / float64(sum)
	scaled := make([]int, len(unscaled))
	total := 0
	for i, w := range unscaled {
		scaled[i] = int(math.RoundToEven(scale * float64(w)))
		total += scaled[i]
	}
	off := total - maxWidth
	for off != 0 {
		if off > 0 {
			for i := 0; i < len(scaled) && off != 0; i++ {
				scaled[i]--
				off--
			}
		} else {
			for i := len(scaled) - 1; i >= 0 && off != 0; i-- {
				scaled[i]++
				off++
			}
		}
	}
	return scaled
}

func (s *tableSection) totalWidth(padding, outer int) int {
	total := 0
	for _, w := range s.columnWidths(0, -1) {
		total += w + padding
	}
	total += 2 + 2*outer
	return max(textLen(s.title)+2+2*outer, total)
}

// textLen is the display length the CLI measures (one column per character; the CLI counts
// East Asian wide characters as two, which this port does not).
func textLen(s string) int { return utf8.RuneCountInString(s) }

type multiTable struct {
	sections []*tableSection
	current  *tableSection
	width    int // the terminal's
}

func (t *multiTable) newSection(title string, indent int) {
	t.current = &tableSection{title: title, indent: indent}
	t.sections = append(t.sections, t.current)
}

// buildTable mirrors TableFormatter._build_table.
func (t *multiTable) buildTable(title *string, v any, indent int) bool {
	if isEmpty(v) {
		return false
	}
	if title != nil {
		t.newSection(*title, indent)
	}
	switch x := v.(type) {
	case []any:
		if _, ok := x[0].(*object); ok {
			t.subTableFromList(x, indent, title)
		} else {
			for _, item := range x {
				if isScalar(item) {
					t.current.addRow([]string{pyStr(item)})
				} else if l, ok := item.([]any); ok && allScalar(l) {
					row := make([]string, len(l))
					for i, e := range l {
						row[i] = pyStr(e)
					}
					t.current.addRow(row)
				} else {
					t.buildTable(nil, item, 0)
				}
			}
		}
	case *object:
		t.subTableFromDict(x, indent)
	}
	return true
}

func (t *multiTable) subTableFromDict(o *object, indent int) {
	headers, more := groupScalarKeys(o)
	if len(headers) == 1 {
		t.current.addRow([]string{headers[0], pyStr(o.vals[headers[0]])})
	} else if len(headers) > 0 {
		t.current.addHeader(headers)
		row := make([]string, len(headers))
		for i, h := range headers {
			row[i] = pyStr(o.vals[h])
		}
		t.current.addRow(row)
	}
	for _, k := range more {
		t.buildTable(&k, o.vals[k], indent+1)
	}
}

func (t *multiTable) subTableFromList(l []any, indent int, title *string) {
	hset, mset := map[string]bool{}, map[string]bool{}
	for _, e := range l {
		if o, ok := e.(*object); ok {
			h, m := groupScalarKeys(o)
			for _, k := range h {
				hset[k] = true
			}
			for _, k := range m {
				mset[k] = true
			}
		}
	}
	headers, more := sortedSet(hset), sortedSet(mset)
	t.current.addHeader(headers)
	for i, e := range l {
		o, _ := e.(*object)
		if o == nil {
			o = newObject()
		}
		if i > 0 && len(more) > 0 {
			name := ""
			if title != nil {
				name = *title
			}
			t.newSection(name, indent)
			t.current.addHeader(headers)
		}
		row := make([]string, len(headers))
		for j, h := range headers {
			if v, ok := o.get(h); ok {
				row[j] = pyStr(v)
			}
		}
		t.current.addRow(row)
		for _, k := range more {
			if v, ok := o.get(k); ok {
				t.buildTable(&k, v, indent+1)
			}
		}
	}
}

func groupScalarKeys(o *object) (headers, more []string) {
	for _, k := range o.keys {
		if isScalar(o.vals[k]) {
			headers = append(headers, k)
		} else {
			more = append(more, k)
		}
	}
	sort.Strings(headers)
	sort.Strings(more)
	return headers, more
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isScalar(v any) bool {
	switch v.(type) {
	case []any, *object:
		return false
	}
	return true
}

func allScalar(l []any) bool {
	for _, e := range l {
		if !isScalar(e) {
			return false
		}
	}
	return true
}

// isEmpty is Python's falsiness, which decides whether a section is drawn at all.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case *object:
		return x.len() == 0
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return err == nil && f == 0
	}
	return false
}

// render draws the table, turning one-row sections into key/value rows when the table is
// wider than the terminal.
func (t *multiTable) render(b *strings.Builder) {
	maxWidth := t.maxWidth()
	if maxWidth > t.width {
		for i, s := range t.sections {
			if len(s.rows) == 1 && len(s.headers) > 0 {
				ns := &tableSection{title: s.title, indent: s.indent}
				for j, h := range s.headers {
					if j < len(s.rows[0]) {
						ns.addRow([]string{h, s.rows[0][j]})
					}
				}
				t.sections[i] = ns
			}
		}
		maxWidth = t.maxWidth()
	}
	b.WriteString(strings.Repeat("-", maxWidth) + "\n")
	for _, s := range t.sections {
		t.renderSection(b, s, maxWidth)
	}
}

func (t *multiTable) maxWidth() int {
	w := 0
	for _, s := range t.sections {
		w = max(w, s.totalWidth(4, s.indent))
	}
	return w
}

func (t *multiTable) renderSection(b *strings.Builder, s *tableSection, maxWidth int) {
	edge := strings.Repeat("|", s.indent)
	line := func(text string) { b.WriteString(edge + text + edge + "\n") }
	maxWidth -= 2 * s.indent
	if s.title != "" {
		line(centerText(s.title, maxWidth, "|", "|"))
		if len(s.headers) == 0 && len(s.rows) == 0 {
			line("+" + strings.Repeat("-", max(0, maxWidth-2)) + "+")
		}
	}
	if len(s.headers) > 0 {
		widths := s.columnWidths(4, maxWidth)
		var cur strings.Builder
		for i, w := range widths {
			left := ""
			if i == 0 {
				left = "|"
			}
			if i < len(s.headers) {
				cur.WriteString(centerText(s.headers[i], w, left, "|"))
			}
		}
		line(lineBreak(widths))
		line(cur.String())
	}
	if len(s.rows) > 0 {
		widths := s.columnWidths(4, maxWidth)
		if len(widths) == 0 {
			return
		}
		line(lineBreak(widths))
		for _, row := range s.rows {
			var cur strings.Builder
			for i, w := range widths {
				if i >= len(row) {
					break
				}
				left := ""
				if i == 0 {
					left = "|"
				}
				cur.WriteString(alignLeft(row[i], w, left, "|"))
			}
			line(cur.String())
		}
		line(lineBreak(widths))
	}
}

func lineBreak(widths []int) string {
	var b strings.Builder
	for i, w := range widths {
		if i == 0 {
			b.WriteString("+" + strings.Repeat("-", max(0, w-2)) + "+")
		} else {
			b.WriteString(strings.Repeat("-", max(0, w-1)) + "+")
		}
	}
	return b.String()
}

func centerText(text string, length int, left, right string) string {
	n := textLen(text)
	start := max(0, length/2-n/2-1)
	soFar := len(left) + start + n
	return left + strings.Repeat(" ", start) + text + strings.Repeat(" ", max(0, length-len(right)-soFar)) + right
}

func alignLeft(text string, length int, left, right string) string {
	n := textLen(text)
	padding := 0
	if length-(n+2+len(left)+len(right)) >= 0 {
		padding = 2
	}
	soFar := len(left) + padding + n
	return left + strings.Repeat(" ", padding) + text + strings.Repeat(" ", max(0, length-soFar-len(right))) + right
}

// formatTable renders v as the AWS CLI's --output table does, titled with the operation name.
func formatTable(title string, v any, termWidth int) string {
	t := &multiTable{width: termWidth}
	var b strings.Builder
	if t.buildTable(&title, v, 0) {
		t.render(&b)
	}
	return b.String()
}
