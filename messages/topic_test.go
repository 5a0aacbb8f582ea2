package messages

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"testing"
)

// TestDecodeTopicFrames: each §2.7 request decodes into its struct on the
// broker's side, each answer on the client's, in upstream's field names.
func TestDecodeTopicFrames(t *testing.T) {
	for _, c := range []struct {
		frame string
		want  any
	}{
		{`{"type":"topic_create","name":"general","description":"d","visibility":"private","_reqId":"1"}`,
			&TopicCreateFrame{Type: TypeTopicCreate, Name: "general", Description: "d", Visibility: "private", ReqID: "1"}},
		{`{"type":"topic_list","_reqId":"2"}`, &TopicListFrame{Type: TypeTopicList, ReqID: "2"}},
		{`{"type":"topic_join","topic":"general","role":"observer"}`, &TopicJoinFrame{Type: TypeTopicJoin, Topic: "general", Role: "observer"}},
		{`{"type":"topic_leave","topic":"x"}`, &TopicRefFrame{Type: TypeTopicLeave, Topic: "x"}},
		{`{"type":"topic_members","topic":"x","_reqId":"3"}`, &TopicRefFrame{Type: TypeTopicMembers, Topic: "x", ReqID: "3"}},
		{`{"type":"topic_mark_read","topic":"x"}`, &TopicRefFrame{Type: TypeTopicMarkRead, Topic: "x"}},
		{`{"type":"topic_history","topic":"x","limit":5,"beforeId":"b"}`,
			&TopicHistoryFrame{Type: TypeTopicHistory, Topic: "x", Limit: 5, BeforeID: "b"}},
	} {
		got, err := DecodeClientFrame([]byte(c.frame))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("DecodeClientFrame(%s) = %#v, %v", c.frame, got, err)
		}
	}
	for _, c := range []struct {
		frame string
		want  any
	}{
		{`{"type":"topic_created","topic":{"id":"i","name":"n","visibility":"public"},"created":true,"_reqId":"1"}`,
			&TopicCreatedFrame{Type: TypeTopicCreated, Topic: TopicRef{ID: "i", Name: "n", Visibility: "public"}, Created: true, ReqID: "1"}},
		{`{"type":"topic_list_response","topics":[{"id":"i","name":"n","description":"","visibility":"dm","memberCount":2,"createdAt":"t"}]}`,
			&TopicListResponseFrame{Type: TypeTopicListResponse, Topics: []TopicInfo{{ID: "i", Name: "n", Visibility: "dm", MemberCount: 2, CreatedAt: "t"}}}},
		{`{"type":"topic_members_response","topic":"n","members":[{"memberId":"m","pubkey":"p","displayName":"d","role":"lead","joinedAt":"t","lastReadAt":null}]}`,
			&TopicMembersResponseFrame{Type: TypeTopicMembersResponse, Topic: "n", Members: []TopicMemberInfo{{MemberID: "m", Pubkey: "p", DisplayName: "d", Role: "lead", JoinedAt: "t"}}}},
		{`{"type":"topic_history_response","topic":"n","messages":[{"id":"1","senderPubkey":"s","nonce":"a","ciphertext":"b","createdAt":"t"}]}`,
			&TopicHistoryResponseFrame{Type: TypeTopicHistoryResponse, Topic: "n", Messages: []TopicMessage{{ID: "1", SenderPubkey: "s", Nonce: "a", Ciphertext: "b", CreatedAt: "t"}}}},
	} {
		_, got, err := DecodeFrame([]byte(c.frame), NewTopicBrokerFrame)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("DecodeFrame(%s) = %#v, %v", c.frame, got, err)
		}
	}
	var fe *FrameError
	if _, err := DecodeClientFrame([]byte(`{"type":"topic_join","topic":7}`)); !errors.As(err, &fe) || fe.Code != FrameInvalidJSON {
		t.Errorf("topic_join with a number for topic: %v", err)
	}
}

func TestTopicRequestValidate(t *testing.T) {
	for _, c := range []struct {
		req  TopicCreateRequest
		fail bool
	}{
		{TopicCreateRequest{Name: "general"}, false},
		{TopicCreateRequest{Name: "team/backend.v2", Visibility: "dm"}, false},
		{TopicCreateRequest{Name: ""}, true},
		{TopicCreateRequest{Name: "#general"}, true},
		{TopicCreateRequest{Name: "two words"}, true},
		{TopicCreateRequest{Name: "ok", Visibility: "secret"}, true},
	} {
		err := c.req.Validate()
		var e *Error
		if (err != nil) != c.fail || err != nil && (!errors.As(err, &e) || e.Code != CodeInvalidTopic) {
			t.Errorf("Validate(%+v) = %v", c.req, err)
		}
	}
	for _, c := range []struct {
		req        TopicMembershipRequest
		fail       bool
		normalized string
	}{
		{TopicMembershipRequest{Topic: "#general"}, false, "general"},
		{TopicMembershipRequest{Topic: "x", Role: "observer"}, false, "x"},
		{TopicMembershipRequest{Topic: "#"}, true, ""},
		{TopicMembershipRequest{Topic: "x", Role: "owner"}, true, "x"},
	} {
		err := c.req.Validate()
		if (err != nil) != c.fail || c.req.Topic != c.normalized {
			t.Errorf("Validate(%+v) = %v", c.req, err)
		}
	}
}

// FuzzDecodeTopicFrame: any frame decodes without a panic, into a topic
// frame or a *FrameError; a topic frame survives a round trip; IsTopicID
// is its pattern.
func FuzzDecodeTopicFrame(f *testing.F) {
	f.Add([]byte(`{"type":"topic_create","name":"general","visibility":"public","_reqId":"1"}`))
	f.Add([]byte(`{"type":"topic_history","topic":"0123456789abcdefghijABCDEFGHIJ12","limit":-1,"beforeId":""}`))
	f.Add([]byte(`{"type":"topic_members","topic":"#x","type":"topic_leave"}`))
	f.Add([]byte(`{"type":"topic_join","topic":"\u0000","role":["lead"]}`))
	idPattern := regexp.MustCompile(`^[0-9A-Za-z_-]{20,}$`)
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeClientFrame(data)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("decode error is not a *FrameError: %v", err)
			}
			return
		}
		if newTopicClientFrame(typeField(v)) == nil {
			return // not a topic frame
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		w, err := DecodeClientFrame(again)
		if err != nil || !reflect.DeepEqual(v, w) {
			t.Fatalf("round trip of %s: %#v, then %#v, %v", data, v, w, err)
		}
		if ref := reflect.ValueOf(v).Elem().FieldByName("Topic"); ref.IsValid() && ref.Kind() == reflect.String {
			if got, want := IsTopicID(ref.String()), idPattern.MatchString(ref.String()); got != want {
				t.Fatalf("IsTopicID(%q) = %v, want %v", ref.String(), got, want)
			}
		}
	})
}
