package awscli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/haleproject/hale/api"
)

// Pagination follows botocore's PageIterator as the AWS CLI drives it: every page is fetched
// and the result lists are concatenated into one response without the service's NextToken.
// --page-size sets the limit member of each call; --max-items stops after that many items and
// prints a NextToken that --starting-token resumes from. That token is botocore's: base64 of
// {"NextToken": <service token>, "boto_truncate_amount": <items of that page already shown>},
// so tokens printed by `aws` and by hale are interchangeable. A --starting-token that does not
// decode as one is taken as a service token as it is.
//
// The CLI's json and table output print the merged response; its text output prints page by
// page (awscli/formatter.py TextFormatter), applying --query to each page and then to
// {"NextToken": {"NextToken": <resume token>}}, so paginate keeps the pages too.

// pageCall makes one call with the given input and returns the parsed response.
type pageCall func(in *object) (*object, error)

// pagingOptions of a run.
type pageOpts struct {
	maxItems, pageSize *int
	startingToken      *string
}

// paged is the answer of an automatically paginated run.
type paged struct {
	// merged is every page's items under the result key, with the first page's other members
	// and, when the run can be resumed, NextToken: what json and table print.
	merged *object
	// pages are the pages as text prints them: each page's items (after --starting-token and
	// --max-items), the first page also with its other members.
	pages []*object
	// resume is the resume token of a --max-items run; "" when every item was returned.
	resume string
}

// paginate fetches the pages of op for in.
func paginate(op *api.Operation, in *object, o pageOpts, call pageCall) (*paged, error) {
	pg := op.Paginator
	current, skip := "", 0
	if o.startingToken != nil {
		current, skip = decodeStartingToken(*o.startingToken)
	}
	if current != "" {
		in.set(pg.InputToken, current)
	}
	if o.pageSize != nil {
		in.set(pg.LimitKey, json.Number(strconv.Itoa(*o.pageSize)))
	}
	var first *object
	var items []any
	var pages []*object
	haveItems := false
	total := 0
	previous := ""
	resume := ""
	for page := 0; ; page++ {
		resp, err := call(in)
		if err != nil {
			return nil, err
		}
		list, ok := resp.vals[pg.ResultKey].([]any)
		haveItems = haveItems || ok
		if page == 0 {
			first = resp
			if skip > 0 {
				list = list[min(skip, len(list)):]
			}
		} else {
			skip = 0
		}
		if o.maxItems != nil && total+len(list) > *o.maxItems {
			keep := *o.maxItems - total
			items = append(items, list[:keep]...)
			pages = append(pages, textPage(pg, resp, page == 0, list[:keep], ok))
			resume = encodeResumeToken(current, keep+skip, true)
			break
		}
		items = append(items, list...)
		pages = append(pages, textPage(pg, resp, page == 0, list, ok))
		total += len(list)
		next, _ := resp.vals[pg.OutputToken].(string)
		if next == "" {
			break
		}
		if o.maxItems != nil && total == *o.maxItems {
			resume = encodeResumeToken(next, 0, false)
			break
		}
		if next == previous {
			return nil, fmt.Errorf("Error during pagination: The same next token was received twice: {'%s': '%s'}", pg.InputToken, next)
		}
		in.set(pg.InputToken, next)
		previous, current = next, next
	}
	merged := newObject()
	for _, k := range first.keys {
		switch k {
		case pg.OutputToken:
		case pg.ResultKey:
			merged.set(k, nonNil(items))
		default:
			merged.set(k, first.vals[k])
		}
	}
	if _, ok := merged.get(pg.ResultKey); !ok && haveItems {
		merged.set(pg.ResultKey, nonNil(items))
	}
	if resume != "" {
		merged.set("NextToken", resume)
	}
	return &paged{merged: merged, pages: pages, resume: resume}, nil
}

// textPage is one page as botocore's PageIterator hands it to the text output: the result key
// with the page's (trimmed) items, or null where the page had none, and on the first page the
// members that are neither items nor the service's token.
func textPage(pg *api.Paginator, resp *object, first bool, list []any, hasList bool) *object {
	p := newObject()
	if first {
		for _, k := range resp.keys {
			if k != pg.OutputToken && k != pg.ResultKey {
				p.set(k, resp.vals[k])
			}
		}
	}
	if hasList {
		p.set(pg.ResultKey, list)
	} else {
		p.set(pg.ResultKey, nil)
	}
	return p
}

func nonNil(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

// encodeResumeToken writes botocore's token: json.dumps of the dict (", " and ": " separators,
// NextToken first), base64-encoded. token "" is null: the first page, truncated.
func encodeResumeToken(token string, truncate int, withTruncate bool) string {
	t := "null"
	if token != "" {
		b, _ := json.Marshal(token)
		t = string(b)
	}
	s := `{"NextToken": ` + t
	if withTruncate {
		s += `, "boto_truncate_amount": ` + strconv.Itoa(truncate)
	}
	return base64.StdEncoding.EncodeToString([]byte(s + "}"))
}

// decodeStartingToken reads a resume token back into the service token and the number of items
// of its page to skip.
func decodeStartingToken(s string) (token string, skip int) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return s, 0
	}
	var t map[string]any
	if json.Unmarshal(raw, &t) != nil {
		return s, 0
	}
	for k := range t {
		if k != "NextToken" && k != "boto_truncate_amount" {
			return s, 0
		}
	}
	v, ok := t["NextToken"]
	if !ok {
		return s, 0
	}
	token, _ = v.(string)
	if n, ok := t["boto_truncate_amount"].(float64); ok && n > 0 {
		skip = int(n)
	}
	return token, skip
}
