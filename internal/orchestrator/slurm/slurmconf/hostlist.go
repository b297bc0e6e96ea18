package slurmconf

import (
	"sort"
	"strconv"
	"strings"
)

// Hostlist compresses host names the way Slurm writes them: names that differ only in a
// trailing number share a prefix and a bracketed list of ranges, e.g. ip-10-222-0-10,
// ip-10-222-0-11, ip-10-222-0-13 -> ip-10-222-0-[10-11,13]. Numbers keep their zero padding;
// names without a trailing number are listed as they are. The result is sorted and free of
// duplicates.
func Hostlist(names []string) string {
	type num struct {
		n     int
		width int
	}
	groups := map[string][]num{}
	var plain []string
	for _, name := range names {
		i := len(name)
		for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
			i--
		}
		if i == len(name) {
			plain = append(plain, name)
			continue
		}
		digits := name[i:]
		n, err := strconv.Atoi(digits)
		if err != nil {
			plain = append(plain, name)
			continue
		}
		width := 0
		if len(digits) > 1 && digits[0] == '0' {
			width = len(digits) // zero-padded: keep the width
		}
		groups[name[:i]] = append(groups[name[:i]], num{n, width})
	}
	var out []string
	prefixes := make([]string, 0, len(groups))
	for p := range groups {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	for _, p := range prefixes {
		nums := groups[p]
		sort.Slice(nums, func(i, j int) bool { return nums[i].n < nums[j].n })
		format := func(x num) string {
			s := strconv.Itoa(x.n)
			for len(s) < x.width {
				s = "0" + s
			}
			return s
		}
		var ranges []string
		for i := 0; i < len(nums); {
			j := i
			for j+1 < len(nums) && (nums[j+1].n == nums[j].n+1 || nums[j+1].n == nums[j].n) && nums[j+1].width == nums[i].width {
				j++
			}
			if nums[j].n == nums[i].n {
				ranges = append(ranges, format(nums[i]))
			} else {
				ranges = append(ranges, format(nums[i])+"-"+format(nums[j]))
			}
			i = j + 1
		}
		if len(ranges) == 1 && !strings.Contains(ranges[0], "-") {
			out = append(out, p+ranges[0])
		} else {
			out = append(out, p+"["+strings.Join(ranges, ",")+"]")
		}
	}
	sort.Strings(plain)
	for i, n := range plain {
		if i == 0 || plain[i-1] != n {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}
