package messages

import (
	"fmt"
	"net/http"
	"strings"
)

// Topics on the daemon: the IPC routes /v1/topics… relay the §2.7 frames
// through a mesh's broker connection, which also resolves `#name` for
// POST /v1/send.

// TopicRequest asks a mesh's broker connection (actors.BrokerConn) for one
// topic operation; the reply is *TopicReply. Op is a request frame type:
// TypeTopicCreate (Name, Description, Visibility), TypeTopicList,
// TypeTopicJoin (Topic, Role), TypeTopicLeave, TypeTopicMembers (Topic)
// or TypeTopicHistory (Topic, Limit, BeforeID). A join or leave is
// followed by topic_members, whose answer is the reply (the broker
// answers neither itself).
type TopicRequest struct {
	Op          string
	Topic       string // an id or a name
	Name        string
	Description string
	Visibility  string
	Role        string
	Limit       int
	BeforeID    string
}

// TopicReply is the reply to *TopicRequest: the field of its Op is set.
type TopicReply struct {
	Created  *TopicCreatedFrame
	Topics   []TopicInfo
	Members  []TopicMemberInfo
	Messages []TopicMessage
	Err      error
}

// Failure returns the request's error, nil on success.
func (r *TopicReply) Failure() error { return r.Err }

// ResolveTopic asks a mesh's broker connection for the id of the topic a
// `#` target names (Ref, the text after `#`): a known id or name from its
// cache, else from a fresh topic_list. The reply is *TopicResolved; a ref
// that names no topic is a 404 topic_not_found *Error. An id-shaped ref
// (IsTopicID) the broker cannot be asked about passes as it is.
type ResolveTopic struct {
	Ref string
}

// TopicResolved is the reply to *ResolveTopic.
type TopicResolved struct {
	ID  string
	Err error
}

// Failure returns the request's error, nil on success.
func (r *TopicResolved) Failure() error { return r.Err }

// TopicNames asks a mesh's broker connection for the names of the topics
// it knows (the last topic list of the connection, and topics created
// since; under them the names its route kept from earlier links,
// KeptNames), by id; it asks the broker nothing.
type TopicNames struct{}

// TopicNamesKnown is the reply to *TopicNames: topic id → name.
type TopicNamesKnown struct {
	Names map[string]string
}

// Failure returns nil: the names are what the connection knows.
func (*TopicNamesKnown) Failure() error { return nil }

// TopicNotFound is the IPC error for a topic the mesh does not have.
func TopicNotFound(mesh, ref string) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeTopicNotFound,
		Detail: fmt.Sprintf("mesh %s has no topic %q: list them with `claudemesh topic list`, or create it with `claudemesh topic create %s`",
			mesh, ref, strings.TrimPrefix(ref, "#"))}
}

// IPC bodies of /v1/topics.

// TopicCreateRequest is the body of POST /v1/topics.
type TopicCreateRequest struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Visibility  string `json:"visibility,omitempty"`
	Mesh        string `json:"mesh,omitempty"`
}

// TopicMembershipRequest is the body of POST /v1/topics/join and
// /v1/topics/leave; Role is join's.
type TopicMembershipRequest struct {
	Topic string `json:"topic"`
	Role  string `json:"role,omitempty"`
	Mesh  string `json:"mesh,omitempty"`
}

// TopicCreated answers POST /v1/topics (201 created, 200 the name's
// existing topic, joined).
type TopicCreated struct {
	Mesh    string   `json:"mesh"`
	Topic   TopicRef `json:"topic"`
	Created bool     `json:"created"`
}

// TopicList answers GET /v1/topics.
type TopicList struct {
	Mesh   string      `json:"mesh"`
	Topics []TopicInfo `json:"topics"`
}

// Names is the list's topic names by id: a message names its topic by id,
// its readers by name.
func (l *TopicList) Names() map[string]string {
	names := make(map[string]string, len(l.Topics))
	for _, t := range l.Topics {
		names[t.ID] = t.Name
	}
	return names
}

// TopicMembers answers GET /v1/topics/members and POST /v1/topics/join
// and /leave (the members after the change).
type TopicMembers struct {
	Mesh    string            `json:"mesh"`
	Topic   string            `json:"topic"`
	Members []TopicMemberInfo `json:"members"`
}

// TopicHistoryItem is a history message with its body decoded (null when
// it is not base64 text: a v2 topic body).
type TopicHistoryItem struct {
	TopicMessage
	Body *string `json:"body"`
}

// TopicHistory answers GET /v1/topics/history, newest first.
type TopicHistory struct {
	Mesh     string             `json:"mesh"`
	Topic    string             `json:"topic"`
	Messages []TopicHistoryItem `json:"messages"`
}

// Validate checks the fields the broker would refuse, so that a bad
// request is a 400 here.
func (r *TopicCreateRequest) Validate() error {
	if _, err := ParseDestination("#" + r.Name); err != nil {
		return badRequest(CodeInvalidTopic, "name must be 1-64 of [A-Za-z0-9_./-] (no #), got %q", r.Name)
	}
	switch r.Visibility {
	case "", "public", "private", "dm":
		return nil
	}
	return badRequest(CodeInvalidTopic, "visibility must be public, private or dm, got %q", r.Visibility)
}

// Validate checks the topic and role of a join or leave.
func (r *TopicMembershipRequest) Validate() error {
	r.Topic = strings.TrimPrefix(r.Topic, "#")
	if r.Topic == "" {
		return badRequest(CodeInvalidTopic, "topic is required: a topic id or name")
	}
	switch r.Role {
	case "", "lead", "member", "observer":
		return nil
	}
	return badRequest(CodeInvalidTopic, "role must be lead, member or observer, got %q", r.Role)
}

// CodeInvalidTopic is the 400 code of a topic request the daemon refuses
// before asking the broker (and of one the broker refused as invalid_args).
const CodeInvalidTopic = "invalid_topic"
