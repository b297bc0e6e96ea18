package api

// Kind is the type of a model shape.
type Kind uint8

// Shape kinds, as the model's "type" names them.
const (
	KindString Kind = iota + 1
	KindInteger
	KindBoolean
	KindTimestamp
	KindStructure
	KindList
	KindMap
	KindFloat
)

// Shape is one shape of the service model, reduced to what code needs to walk a value at run
// time: its kind, its members (structures), its element (lists; the value of maps), its key
// (maps) and its enum values.
type Shape struct {
	Name    string
	Kind    Kind
	Members []Member // structures, sorted by name
	Elem    string   // lists: member shape; maps: value shape
	Key     string   // maps: key shape
	Enum    []string
	// Constraints describes the shape's length, range, list-size and pattern constraints in
	// words ("length 1-63; pattern `...`"), for help texts; the checks themselves are the
	// generated validate methods.
	Constraints string
	Union       bool
	Exception   bool
}

// Member is a structure member: its name on the wire, its shape, and whether the model requires it.
type Member struct {
	Name     string
	Shape    string
	Required bool
}

// Member returns the member called name, or nil.
func (s *Shape) Member(name string) *Member {
	for i := range s.Members {
		if s.Members[i].Name == name {
			return &s.Members[i]
		}
	}
	return nil
}
