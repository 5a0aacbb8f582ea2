package messages

// Topic frames (wire protocol §2.7), in the upstream broker's shapes. Each
// request may carry _reqId, echoed in its answer; topic_join, topic_leave
// and topic_mark_read have no answer but an error. A `#` target names a
// topic id, never a name.

// Topic frame types.
const (
	TypeTopicCreate          = "topic_create"
	TypeTopicCreated         = "topic_created"
	TypeTopicList            = "topic_list"
	TypeTopicListResponse    = "topic_list_response"
	TypeTopicJoin            = "topic_join"
	TypeTopicLeave           = "topic_leave"
	TypeTopicMembers         = "topic_members"
	TypeTopicMembersResponse = "topic_members_response"
	TypeTopicHistory         = "topic_history"
	TypeTopicHistoryResponse = "topic_history_response"
	TypeTopicMarkRead        = "topic_mark_read"
)

// CodeTopicNotFound is the error frame's code (and the IPC error's) for a
// topic id or name that names no topic of the mesh.
const CodeTopicNotFound = "topic_not_found"

// TopicIDMinLength is the shortest text after `#` that is taken for a
// topic id rather than a name (the upstream daemon's rule; ids are 32).
const TopicIDMinLength = 20

// TopicCreateFrame creates a topic (or finds the one of that name); the
// answer is *TopicCreatedFrame.
type TopicCreateFrame struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Visibility  string `json:"visibility,omitempty"` // public (default), private or dm
	ReqID       string `json:"_reqId,omitempty"`
}

// TopicRef is a topic as topic_created names it.
type TopicRef struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Visibility string `json:"visibility"`
}

// TopicCreatedFrame answers topic_create; Created is false when the name
// was taken and Topic is that topic.
type TopicCreatedFrame struct {
	Type    string   `json:"type"`
	Topic   TopicRef `json:"topic"`
	Created bool     `json:"created"`
	ReqID   string   `json:"_reqId,omitempty"`
}

// TopicListFrame asks for the mesh's topics; the answer is
// *TopicListResponseFrame.
type TopicListFrame struct {
	Type  string `json:"type"`
	ReqID string `json:"_reqId,omitempty"`
}

// TopicInfo is one topic of topic_list_response.
type TopicInfo struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Visibility  string `json:"visibility"`
	MemberCount int    `json:"memberCount"`
	CreatedAt   string `json:"createdAt"`
}

// TopicListResponseFrame answers topic_list.
type TopicListResponseFrame struct {
	Type   string      `json:"type"`
	Topics []TopicInfo `json:"topics"`
	ReqID  string      `json:"_reqId,omitempty"`
}

// TopicJoinFrame joins the topic (an id or a name) with a role (lead,
// member or observer; absent: member). No answer but an error.
type TopicJoinFrame struct {
	Type  string `json:"type"`
	Topic string `json:"topic"`
	Role  string `json:"role,omitempty"`
	ReqID string `json:"_reqId,omitempty"`
}

// TopicRefFrame is a request naming one topic (an id or a name):
// topic_leave, topic_members and topic_mark_read, told apart by Type.
type TopicRefFrame struct {
	Type  string `json:"type"`
	Topic string `json:"topic"`
	ReqID string `json:"_reqId,omitempty"`
}

// TopicMemberInfo is one member of topic_members_response. LastReadAt is
// null until the member marked the topic read.
type TopicMemberInfo struct {
	MemberID    string  `json:"memberId"`
	Pubkey      string  `json:"pubkey"`
	DisplayName string  `json:"displayName"`
	Role        string  `json:"role"`
	JoinedAt    string  `json:"joinedAt"`
	LastReadAt  *string `json:"lastReadAt"`
}

// TopicMembersResponseFrame answers topic_members; Topic is the request's.
type TopicMembersResponseFrame struct {
	Type    string            `json:"type"`
	Topic   string            `json:"topic"`
	Members []TopicMemberInfo `json:"members"`
	ReqID   string            `json:"_reqId,omitempty"`
}

// TopicHistoryFrame asks for a topic's messages, newest first: at most
// Limit, older than BeforeID when set.
type TopicHistoryFrame struct {
	Type     string `json:"type"`
	Topic    string `json:"topic"`
	Limit    int    `json:"limit,omitempty"`
	BeforeID string `json:"beforeId,omitempty"`
	ReqID    string `json:"_reqId,omitempty"`
}

// TopicMessage is one message of topic_history_response (its body as
// sent: base64 plaintext for a v1 topic body).
type TopicMessage struct {
	ID             string `json:"id"`
	SenderPubkey   string `json:"senderPubkey"`
	SenderMemberID string `json:"senderMemberId,omitempty"`
	SenderName     string `json:"senderName,omitempty"`
	Nonce          string `json:"nonce"`
	Ciphertext     string `json:"ciphertext"`
	BodyVersion    int    `json:"bodyVersion,omitempty"`
	ReplyToID      string `json:"replyToId,omitempty"`
	CreatedAt      string `json:"createdAt"`
}

// TopicHistoryResponseFrame answers topic_history; Topic is the request's.
type TopicHistoryResponseFrame struct {
	Type     string         `json:"type"`
	Topic    string         `json:"topic"`
	Messages []TopicMessage `json:"messages"`
	ReqID    string         `json:"_reqId,omitempty"`
}

// newTopicClientFrame is DecodeClientFrame's table for the topic requests.
func newTopicClientFrame(typ string) any {
	switch typ {
	case TypeTopicCreate:
		return new(TopicCreateFrame)
	case TypeTopicList:
		return new(TopicListFrame)
	case TypeTopicJoin:
		return new(TopicJoinFrame)
	case TypeTopicLeave, TypeTopicMembers, TypeTopicMarkRead:
		return new(TopicRefFrame)
	case TypeTopicHistory:
		return new(TopicHistoryFrame)
	}
	return nil
}

// NewTopicBrokerFrame is the decoder table, for a client, of the broker's
// topic answers: a pointer to the frame struct of typ, nil for another type.
func NewTopicBrokerFrame(typ string) any {
	switch typ {
	case TypeTopicCreated:
		return new(TopicCreatedFrame)
	case TypeTopicListResponse:
		return new(TopicListResponseFrame)
	case TypeTopicMembersResponse:
		return new(TopicMembersResponseFrame)
	case TypeTopicHistoryResponse:
		return new(TopicHistoryResponseFrame)
	}
	return nil
}

// IsTopicID reports whether ref (the text after `#`) has the form of a topic
// id — at least TopicIDMinLength of [0-9A-Za-z_-] — and is passed to the
// broker as it is rather than resolved as a name.
func IsTopicID(ref string) bool {
	if len(ref) < TopicIDMinLength {
		return false
	}
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
