package main

import (
	"fmt"
	"strings"
)

// diffHunks is the unified diff of line slices a and b, with ctx lines of
// context around each change: the hunks as text, "@@ -l,n +l,n @@" first.
// A longest common subsequence table is enough for a settings file.
func diffHunks(a, b []string, ctx int) []string {
	ops := diffOps(a, b)
	var hunks []string
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-ctx, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		hunks = append(hunks, hunkText(ops[start:end]))
		i = end
	}
	return hunks
}

// diffOp is one line of a diff: ' ' kept, '-' only in a, '+' only in b;
// ai and bi are its 1-based line numbers on each side.
type diffOp struct {
	kind   byte
	line   string
	ai, bi int
}

func diffOps(a, b []string) []diffOp {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i], i + 1, j + 1})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
			ops = append(ops, diffOp{'+', b[j], i, j + 1})
			j++
		default:
			ops = append(ops, diffOp{'-', a[i], i + 1, j})
			i++
		}
	}
	return ops
}

func hunkText(ops []diffOp) string {
	var aStart, bStart, aLen, bLen int
	for _, o := range ops {
		if o.kind != '+' {
			if aLen == 0 {
				aStart = o.ai
			}
			aLen++
		}
		if o.kind != '-' {
			if bLen == 0 {
				bStart = o.bi
			}
			bLen++
		}
	}
	if aLen == 0 {
		aStart = ops[0].ai
	}
	if bLen == 0 {
		bStart = ops[0].bi
	}
	var s strings.Builder
	fmt.Fprintf(&s, "@@ -%d,%d +%d,%d @@\n", aStart, aLen, bStart, bLen)
	for _, o := range ops {
		s.WriteByte(o.kind)
		s.WriteString(o.line)
		s.WriteByte('\n')
	}
	return s.String()
}
