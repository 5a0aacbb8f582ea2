package messages

// ValidSlug reports whether s has the form of a mesh slug (and of an
// agent's name on the embedded broker's mesh): 1-64 of a-z, 0-9, '_' and
// '-', starting with a letter or digit. The broker's store checks it
// before it creates a mesh, config before it mints an agent, the IPC
// server in a mesh filter. (Not a regexp: `{0,63}` compiles to a 64-state
// program at every start of every command.)
func ValidSlug(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '-') {
			return false
		}
	}
	return true
}
