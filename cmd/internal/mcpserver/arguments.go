package mcpserver

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// What the agent reads of its own arguments and of the tools' schemas.
// An argument is quoted back at most echoLimit characters long; a refused
// argument is named with the bound it broke, in a sentence ("limit must
// be at most 100, got 1000"), never in the validator's words, which quote
// a value whole and say "maximum: 1000/1 is greater than 100.000000".

// echoLimit is the most of an argument's text an error quotes back.
const echoLimit = 200

// clip is s cut to echoLimit characters, saying how long it was.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= echoLimit {
		return s
	}
	n := 0
	for i := range s {
		if n == echoLimit {
			return fmt.Sprintf("%s… (%d characters)", s[:i], utf8.RuneCountInString(s))
		}
		n++
	}
	return s
}

// quoteArg is an argument's text quoted, clipped to echoLimit.
func quoteArg(s string) string { return strconv.Quote(clip(s)) }

// plainTypes makes s and the schemas below it name one type each: the
// ["null", T] that jsonschema.For infers for a pointer or a slice becomes
// T (an absent value is left out; a null argument is taken as absent,
// decodeArguments), so that strict validators (Ajv's strict mode, the
// MCP Inspector's --strict) take them as they are.
func plainTypes(s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		plainTypes(p)
	}
	plainTypes(s.Items)
	if s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil {
		plainTypes(s.AdditionalProperties)
	}
	return s
}

// dropNulls removes from args the properties given as null whose schema
// does not take null: an agent's null for an optional argument means it
// is absent (a required one is then refused as missing).
func dropNulls(args map[string]any, s *jsonschema.Schema) {
	for k, v := range args {
		if p := s.Properties[k]; v == nil && p != nil && len(schemaTypes(p)) > 0 && !slices.Contains(schemaTypes(p), "null") {
			delete(args, k)
		}
	}
}

// fillNulls is a tool's structured result v with the nulls where its
// schema s has an array made empty arrays (a nil Go slice marshals as
// null, which the schema's plain "array" refuses).
func fillNulls(v any, s *jsonschema.Schema) any {
	if s == nil {
		return v
	}
	switch x := v.(type) {
	case nil:
		if s.Type == "array" {
			return []any{}
		}
	case map[string]any:
		for k, p := range s.Properties {
			if val, ok := x[k]; ok {
				x[k] = fillNulls(val, p)
			}
		}
	case []any:
		for i := range x {
			x[i] = fillNulls(x[i], s.Items)
		}
	}
	return v
}

// argumentProblem is what is wrong with a tool call's arguments v that
// its input schema s refuses, as a sentence naming the argument and the
// bound; "" if it finds nothing (the keywords our schemas use are all
// checked).
func argumentProblem(s *jsonschema.Schema, v any) string {
	args, ok := v.(map[string]any)
	if !ok {
		return "the arguments must be a JSON object of named values, got " + describe(v)
	}
	var unknown []string
	for k := range args {
		if _, ok := s.Properties[k]; !ok {
			unknown = append(unknown, quoteArg(k))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		names := slices.Sorted(maps.Keys(s.Properties))
		takes := "none"
		if len(names) > 0 {
			takes = strings.Join(names, ", ")
		}
		return fmt.Sprintf("this tool has no argument %s (its arguments: %s)", strings.Join(unknown, ", "), takes)
	}
	for _, k := range s.Required {
		if _, ok := args[k]; !ok {
			return k + " is required"
		}
	}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if p := valueProblem(k, s.Properties[k], args[k]); p != "" {
			return p
		}
	}
	return ""
}

// valueProblem is what is wrong with the value v of the argument name
// against its schema s, "" for nothing.
func valueProblem(name string, s *jsonschema.Schema, v any) string {
	if s == nil {
		return ""
	}
	if len(s.AnyOf) > 0 { // send_message's to: text, or a list of texts
		for _, alt := range s.AnyOf {
			if slices.ContainsFunc(schemaTypes(alt), func(t string) bool { return isType(v, t) }) {
				return valueProblem(name, alt, v)
			}
		}
	}
	if types := schemaTypes(s); len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return isType(v, t) }) {
		return fmt.Sprintf("%s must be %s, got %s", name, typeWords(types), describe(v))
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return isScalar(v) && e == v }) {
		choices := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			choices[i] = fmt.Sprint(e)
		}
		return fmt.Sprintf("%s must be one of %s, got %s", name, strings.Join(choices, ", "), describe(v))
	}
	switch x := v.(type) {
	case string:
		return textProblem(name, s, x)
	case float64:
		if s.Minimum != nil && x < *s.Minimum {
			return fmt.Sprintf("%s must be at least %g, got %g", name, *s.Minimum, x)
		}
		if s.Maximum != nil && x > *s.Maximum {
			return fmt.Sprintf("%s must be at most %g, got %g", name, *s.Maximum, x)
		}
	case []any:
		if s.MinItems != nil && len(x) < *s.MinItems {
			return fmt.Sprintf("%s must have at least %s, got %d", name, count(*s.MinItems, "item", "items"), len(x))
		}
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			return fmt.Sprintf("%s must have at most %s, got %d", name, count(*s.MaxItems, "item", "items"), len(x))
		}
		for i, item := range x {
			if p := valueProblem(fmt.Sprintf("%s[%d]", name, i), s.Items, item); p != "" {
				return p
			}
		}
	}
	return ""
}

// textProblem is what is wrong with the text x of the argument name.
func textProblem(name string, s *jsonschema.Schema, x string) string {
	n := utf8.RuneCountInString(x)
	switch {
	case s.MinLength != nil && n < *s.MinLength && *s.MinLength == 1:
		return name + " must not be empty"
	case s.MinLength != nil && n < *s.MinLength:
		return fmt.Sprintf("%s must be at least %s long, got %d", name, count(*s.MinLength, "character", "characters"), n)
	case s.MaxLength != nil && n > *s.MaxLength:
		return fmt.Sprintf("%s must be at most %s long, got %d", name, count(*s.MaxLength, "character", "characters"), n)
	case s.Pattern != "":
		if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(x) {
			return fmt.Sprintf("%s must match the pattern %s, got %s", name, s.Pattern, describe(x))
		}
	}
	return ""
}

// isScalar reports whether v is a JSON string, number, boolean or null
// (comparable with ==).
func isScalar(v any) bool {
	switch v.(type) {
	case nil, string, float64, bool:
		return true
	}
	return false
}

// schemaTypes are the types s takes: its type, or those of the schemas
// of its anyOf.
func schemaTypes(s *jsonschema.Schema) []string {
	switch {
	case s.Type != "":
		return []string{s.Type}
	case len(s.AnyOf) > 0:
		var types []string
		for _, alt := range s.AnyOf {
			types = append(types, schemaTypes(alt)...)
		}
		return types
	}
	return s.Types
}

// isType reports whether v, decoded by encoding/json, is of the JSON
// schema type t.
func isType(v any, t string) bool {
	switch x := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case float64:
		return t == "number" || t == "integer" && x == math.Trunc(x) && !math.IsInf(x, 0)
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

// typeWords is a list of schema types as a sentence reads it: "an
// integer", "text or null".
func typeWords(types []string) string {
	words := make([]string, len(types))
	for i, t := range types {
		words[i] = map[string]string{"string": "text (a JSON string)", "integer": "an integer", "number": "a number",
			"boolean": "true or false", "array": "a list (a JSON array)", "object": "an object", "null": "null"}[t]
	}
	return strings.Join(words, " or ")
}

// describe is a value as an error names it, text clipped to echoLimit.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "the text " + quoteArg(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list of " + count(len(x), "item", "items")
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// count is n things: "1 topic", "2 topics".
func count(n int, one, many string) string {
	return strconv.Itoa(n) + " " + plural(n, one, many)
}
