// Command render-draft turns the draft an episode claimed into the post to
// publish. It is the exec step of the drafts-publisher example: allot runs
// it in the episode's directory with the step's input as JSON on stdin,
// where claimed.payload is the draft as `starter input add` stored it,
// {"title": "...", "body": "..."}, and claimed.ref its reference (also in
// ALLOT_INPUT).
//
// It writes post.md there (the step's declared output, which allot keeps
// with its sha256): the title as a heading, the body, and a last line
// naming the draft and the episode. Rendering is a pure function of the
// draft, so running it again (a retry, a re-run after a lost file) writes
// the same post.
//
// Exit codes: 0 rendered; 1 the episode claimed no draft, or the draft has
// no title or body: retrying cannot fix that, so allot parks the episode
// with this message until an operator decides (`starter episode resolve
// --retry` after correcting, or `--abandon`).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"allot/artifacts"
	"allot/step"
)

// Draft is the payload of a draft input.
type Draft struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "render-draft:", err)
		os.Exit(1)
	}
}

func run() error {
	var in step.Input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		return fmt.Errorf("read the step's input from stdin: %w", err)
	}
	// The two ways allot names the draft agree.
	if env := os.Getenv("ALLOT_INPUT"); in.Claimed != nil && env != in.Claimed.Ref {
		return fmt.Errorf("ALLOT_INPUT is %q but the input on stdin claimed %q", env, in.Claimed.Ref)
	}
	post, err := Render(in)
	if err != nil {
		return err
	}
	// In the working directory, the episode's; written whole (temporary
	// file, fsync, rename) so a crash never leaves half a post.
	_, err = artifacts.WriteFile("post.md", []byte(post))
	return err
}

// Render is the post of the draft in.Claimed.
func Render(in step.Input) (string, error) {
	if in.Claimed == nil {
		return "", errors.New("the episode claimed no draft: is [pipeline.inputs] set in the pipeline file?")
	}
	var d Draft
	if err := json.Unmarshal(in.Claimed.Payload, &d); err != nil {
		return "", fmt.Errorf("draft %s: the payload %s is not {\"title\": ..., \"body\": ...}: %v", in.Claimed.Ref, in.Claimed.Payload, err)
	}
	if strings.TrimSpace(d.Title) == "" || strings.TrimSpace(d.Body) == "" {
		return "", fmt.Errorf("draft %s has no title or no body (payload %s): this episode claimed it, so a retry fails the same way; "+
			"give the episode up with the abandon remedy `starter episode show --pipeline %s --episode %s` prints, "+
			"then add the draft again under a new reference with both: starter input add --pipeline %s --ref NEW-REF --payload-file DRAFT.json",
			in.Claimed.Ref, in.Claimed.Payload, in.Pipeline, in.EpisodeID, in.Pipeline)
	}
	return fmt.Sprintf("# %s\n\n%s\n\n<!-- draft %s, episode %s -->\n", strings.TrimSpace(d.Title), strings.TrimSpace(d.Body), in.Claimed.Ref, in.EpisodeID), nil
}
