package console_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"allot"
	"allot/internal/console"
	"allot/internal/ledger"
	"allot/internal/ledgertest"
	"allot/internal/operator"
)

// The operator page's security promises (docs/design.md, "The operator
// page"): nothing changes without a signed-in operator, a same-origin
// request and the session's CSRF token; a wrong token says nothing about
// whether a token file exists; a refusal is the CLI's message; reasons
// render as text; the token appears in no page and no log line.

const testToken = "t0ken-of-alice-0123456789abcdefghijklmnop"

type actingPage struct {
	srv    *httptest.Server
	client *http.Client
	in     console.ReadInput
	acts   *console.Actions
	logs   *bytes.Buffer
	// tokens is the token file's path ("" read-only).
	tokens string
}

// newActingPage serves the budget fixture's page with an operator "alice"
// (acting: true) or read-only; its client keeps cookies and does not
// follow redirects.
func newActingPage(t *testing.T, acting bool) *actingPage {
	t.Helper()
	if !acting {
		return newActingPageWith(t, "")
	}
	return newActingPageWith(t, "# operators\nalice:"+testToken+"\n")
}

// newActingPageWith is newActingPage with a token file of these lines
// ("" read-only).
func newActingPageWith(t *testing.T, tokens string) *actingPage {
	t.Helper()
	l, _ := ledgertest.BudgetLedger(t)
	set := ledgertest.BudgetPipelines(t)
	in := console.ReadInput{Ledger: l.Led, Pipelines: set, Now: ledgertest.BudgetMonday.Add(3 * time.Hour)}
	p := &actingPage{in: in, logs: &bytes.Buffer{}}
	logger := slog.New(slog.NewTextHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var h *console.Server
	if tokens != "" {
		path := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(path, []byte(tokens), 0o600); err != nil {
			t.Fatal(err)
		}
		p.tokens = path
		creds, err := console.LoadCredentials(path)
		if err != nil {
			t.Fatal(err)
		}
		p.acts = &console.Actions{Ledger: l.Led, Pipelines: set}
		h = console.NewActingServer(in, creds, p.acts, logger)
	} else {
		h = console.NewServer(in, logger)
	}
	p.srv = httptest.NewServer(h)
	t.Cleanup(p.srv.Close)
	jar, _ := cookiejar.New(nil)
	p.client = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return p
}

// post sends a form as the page's own forms do (same origin), or with the
// headers given.
func (p *actingPage) post(t *testing.T, path string, form url.Values, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", p.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

func (p *actingPage) get(t *testing.T, path string) string {
	t.Helper()
	res, err := p.client.Get(p.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d\n%s", path, res.StatusCode, body)
	}
	return string(body)
}

func (p *actingPage) signIn(t *testing.T) {
	t.Helper()
	if code, body := p.post(t, "/login", url.Values{"token": {testToken}}, nil); code != http.StatusSeeOther {
		t.Fatalf("sign-in with the token = %d\n%s", code, body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf is the CSRF token the signed-in page's forms carry.
func (p *actingPage) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.get(t, "/"))
	if m == nil {
		t.Fatal("the signed-in page has no form with a CSRF token")
	}
	return m[1]
}

func (p *actingPage) paused(t *testing.T, vendor string) bool {
	t.Helper()
	s, err := p.in.Ledger.VendorStateOf(context.Background(), vendor, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Paused
}

func pauseForm(csrf, reason string) url.Values {
	return url.Values{"act": {console.ActVendorPause}, "vendor": {"covers"}, "reason": {reason}, "csrf": {csrf}}
}

func TestActionWithoutASignedInOperatorChangesNothing(t *testing.T) {
	for _, acting := range []bool{false, true} {
		p := newActingPage(t, acting)
		code, body := p.post(t, "/act", pauseForm("", "no token"), nil)
		if code != http.StatusForbidden || !strings.Contains(body, "sign in with an operator token first") {
			t.Errorf("acting=%v: an action without a session = %d, want 403 saying to sign in:\n%s", acting, code, body)
		}
		if p.paused(t, "covers") {
			t.Errorf("acting=%v: the refused action paused the vendor", acting)
		}
	}
}

func TestActionWithoutTheSessionsCSRFTokenChangesNothing(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	for _, csrf := range []string{"", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"} {
		code, body := p.post(t, "/act", pauseForm(csrf, "forged"), nil)
		if code != http.StatusForbidden || !strings.Contains(body, "CSRF token does not match") {
			t.Errorf("csrf %q: = %d, want 403 naming the CSRF token:\n%s", csrf, code, body)
		}
	}
	if p.paused(t, "covers") {
		t.Fatal("an action with a wrong CSRF token paused the vendor")
	}
}

func TestCrossOriginPostIsRefused(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	csrf := p.csrf(t)
	for name, h := range map[string]map[string]string{
		"cross-site fetch":  {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
		"foreign origin":    {"Origin": "https://evil.example", "Sec-Fetch-Site": ""},
		"same-site, other":  {"Origin": "http://127.0.0.2:1", "Sec-Fetch-Site": "same-site"},
		"sign-in elsewhere": nil,
	} {
		path, form := "/act", pauseForm(csrf, "from "+name)
		if h == nil { // a sign-in posted by another site
			path, form, h = "/login", url.Values{"token": {testToken}}, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
		}
		code, body := p.post(t, path, form, h)
		if code != http.StatusForbidden || !strings.Contains(body, "came from another site") {
			t.Errorf("%s: = %d, want 403 naming the other site:\n%s", name, code, body)
		}
	}
	if p.paused(t, "covers") {
		t.Fatal("a cross-origin action paused the vendor")
	}
}

// A wrong token gets the same answer from a page with a token file and
// from one without: nothing says whether one exists.
func TestWrongTokenSaysNothingOfTheTokenFile(t *testing.T) {
	var answers []string
	for _, acting := range []bool{true, false} {
		p := newActingPage(t, acting)
		for _, token := range []string{"", "wrong", testToken[:len(testToken)-1], testToken + "x"} {
			req, _ := http.NewRequest(http.MethodPost, p.srv.URL+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			res, err := p.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
				t.Errorf("acting=%v token %q: = %d with cookies %v, want 403 and none", acting, token, res.StatusCode, res.Cookies())
			}
			answers = append(answers, refusal(string(body)))
		}
	}
	for _, a := range answers {
		if a != answers[0] || !strings.Contains(a, "the token was not accepted") {
			t.Fatalf("the refusals differ or do not say the token was not accepted: %q", answers)
		}
	}
}

var noticeText = regexp.MustCompile(`<p class="notice[^"]*" role="status">([^<]*)</p>`)

// refusal is the notice of a refused form's page.
func refusal(page string) string {
	m := noticeText.FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestSignedInActionRecordsWhoAndWhyAndRendersTheReasonAsText(t *testing.T) {
	p := newActingPage(t, true)
	if page := p.get(t, "/"); !strings.Contains(page, `action="/login"`) || strings.Contains(page, `action="/act"`) {
		t.Fatal("before signing in, the page should offer the sign-in form and no action")
	}
	p.signIn(t)
	reason := `<script>alert("x")</script> the bill is disputed`
	code, body := p.post(t, "/act", pauseForm(p.csrf(t), reason), nil)
	if code != http.StatusSeeOther {
		t.Fatalf("the signed-in pause = %d:\n%s", code, body)
	}
	s, err := p.in.Ledger.VendorStateOf(context.Background(), "covers", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Paused || s.PausedBy != "alice" || s.PauseReason != reason {
		t.Fatalf("vendor covers after the page's pause: %+v, want paused by alice with the reason", s)
	}
	page := p.get(t, "/")
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; the bill is disputed") {
		t.Fatalf("the reason is not rendered as text:\n%s", page)
	}
	if !strings.Contains(page, "vendor covers is paused") {
		t.Errorf("the page does not say what the action did:\n%s", page)
	}
	if strings.Contains(page, testToken) || strings.Contains(p.logs.String(), testToken) {
		t.Fatal("the token appears in the page or the log")
	}
	if !strings.Contains(p.logs.String(), "operator=alice") {
		t.Errorf("the log does not say who acted:\n%s", p.logs)
	}
}

// The page refuses what the CLI refuses, with the CLI's message, and
// writes nothing.
func TestActionRefusesWhatTheCLIRefusesWithItsMessage(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	csrf := p.csrf(t)
	ctx := context.Background()
	set := p.in.Pipelines
	_, unknownVendor := operator.PauseVendor(ctx, p.in.Ledger, set, operator.VendorPauseInput{Name: "nosuch", Reason: "r", By: "alice"})
	_, tooPrecise := operator.ParseLimitAmount(set, "video-weekly", "12.505")
	for name, c := range map[string]struct {
		form url.Values
		want error
	}{
		"unknown vendor": {url.Values{"act": {console.ActVendorPause}, "vendor": {"nosuch"}, "reason": {"r"}, "csrf": {csrf}}, unknownVendor},
		"not an amount":  {url.Values{"act": {console.ActSetLimit}, "budget": {"video-weekly"}, "period": {"2026-W32"}, "limit": {"12.505"}, "reason": {"r"}, "request_id": {"x"}, "csrf": {csrf}}, tooPrecise},
	} {
		if c.want == nil {
			t.Fatalf("%s: the CLI's path refused nothing", name)
		}
		code, body := p.post(t, "/act", c.form, nil)
		want := "refused: " + allot.ErrorMessage(c.want)
		if got := refusal(body); code != http.StatusUnprocessableEntity || got != htmlText(want) {
			t.Errorf("%s: = %d %q, want 422 %q", name, code, got, want)
		}
	}
	code, body := p.post(t, "/act", url.Values{"act": {console.ActVendorPause}, "vendor": {"covers"}, "reason": {"  "}, "csrf": {csrf}}, nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "fill in the reason") {
		t.Errorf("an action without a reason = %d:\n%s", code, refusal(body))
	}
	if p.paused(t, "covers") {
		t.Fatal("a refused action paused a vendor")
	}
}

// htmlText is s as html/template writes text.
func htmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// A limit is typed on the page as a person reads money: in major units of
// the budget's currency, as the page prints it ("12.50", "1,000.00 USD");
// the ledger records it exactly in minor units.
func TestSetLimitTakesMajorUnits(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	ctx := context.Background()
	b, _ := p.in.Pipelines.Budget("video-weekly")
	for i, c := range []struct {
		typed string
		minor int64
	}{{"12.50", 1250}, {"1,000.00 USD", 100000}, {"15", 1500}} {
		form := url.Values{"act": {console.ActSetLimit}, "budget": {"video-weekly"}, "period": {"2026-W32"}, "limit": {c.typed},
			"reason": {"the launch"}, "request_id": {fmt.Sprint("req-", i)}, "csrf": {p.csrf(t)}}
		if code, body := p.post(t, "/act", form, nil); code != http.StatusSeeOther {
			t.Fatalf("set-limit %q = %d:\n%s", c.typed, code, refusal(body))
		}
		bp, err := p.in.Ledger.BudgetPeriodOf(ctx, ledger.LimitOf(b), "2026-W32")
		if err != nil {
			t.Fatal(err)
		}
		if bp.Limit != c.minor {
			t.Errorf("after typing %q the limit is %d minor units, want %d", c.typed, bp.Limit, c.minor)
		}
	}
	if page := p.get(t, "/"); !strings.Contains(page, `placeholder="new limit in USD, such as 150.00"`) {
		t.Errorf("the limit's box does not say its unit:\n%s", page)
	}
}

// A budget with parked episodes says what admits them all and offers it:
// the fixture's week has 50 free and one episode parked asking 250, so
// the page offers a raise by 2.00 USD to 9.50 USD, its box filled in;
// sent as it is (with a reason), it is recorded like any raise, and the
// period then has room for every parked episode.
func TestRaiseToAdmitAllParked(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	page := p.get(t, "/")
	if !strings.Contains(page, "Raise the limit by 2.00 USD, to 9.50 USD, to admit all 1 (together they ask 2.50 USD; 0.50 USD is free).") {
		t.Fatalf("the page does not offer the raise that admits the parked episode:\n%s", page)
	}
	if want := allot.BudgetRaiseCommand("video-weekly", "2026-W32", 950, "admit the parked episodes"); !strings.Contains(page, htmlText(want)) {
		t.Errorf("the page does not print the raise's command %q", want)
	}
	m := regexp.MustCompile(`name="limit"[^>]*value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil || m[1] != "9.50" {
		t.Fatalf("the raise's box = %q, want it filled with 9.50", m)
	}
	form := url.Values{"act": {console.ActSetLimit}, "budget": {"video-weekly"}, "period": {"2026-W32"}, "limit": {m[1]},
		"reason": {"admit the parked episode"}, "request_id": {"admit-all"}, "csrf": {p.csrf(t)}}
	if code, body := p.post(t, "/act", form, nil); code != http.StatusSeeOther {
		t.Fatalf("the raise = %d:\n%s", code, refusal(body))
	}
	b, err := console.Read(context.Background(), p.in)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range b.Money {
		if row.Budget == "video-weekly" && (row.Limit != 950 || row.RaiseAll != 0 || row.Free < row.ParkedAsk) {
			t.Errorf("after the raise: %+v; want a limit of 950 with room for the parked", row)
		}
	}
	if page := p.get(t, "/"); !strings.Contains(page, "The limit has room for all 1 now") {
		t.Errorf("after the raise the page does not say the parked episode fits:\n%s", page)
	}
}

// Two or more episodes of a pipeline waiting for approval are one item
// with one approve-all form naming each, and each keeps its own form
// inside; a single one stays an item of its own (issue 41 §1).
func TestApprovalsOfAPipelineAreApprovedTogether(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	ctx := context.Background()
	eps, err := p.in.Ledger.ListEpisodes(ctx, "weekly", "")
	if err != nil || len(eps) < 3 {
		t.Fatalf("ListEpisodes = %d, %v", len(eps), err)
	}
	wait := func(id string) {
		t.Helper()
		if err := p.in.Ledger.RecordEpisodeOutcome(ctx, "weekly", id, allot.OutcomeWaitingApproval, "", ledgertest.BudgetMonday); err != nil {
			t.Fatal(err)
		}
	}
	wait(eps[0].ID)
	page := p.get(t, "/")
	if strings.Contains(page, `value="`+console.ActApproveAll+`"`) || strings.Contains(page, `class="group"`) {
		t.Errorf("one waiting episode was grouped:\n%s", page)
	}
	if !strings.Contains(page, `name="episode" value="`+eps[0].ID+`"`) {
		t.Errorf("the waiting episode has no form of its own:\n%s", page)
	}
	wait(eps[2].ID)
	page = p.get(t, "/")
	for _, want := range []string{
		"2 episodes of weekly wait for approval",
		`<input type="hidden" name="act" value="` + console.ActApproveAll + `">`,
		`name="episodes" value="` + eps[0].ID + " " + eps[2].ID + `"`,
		`<details class="group" data-key="approvals/weekly">`,
		`name="episode" value="` + eps[0].ID + `"`,
		`name="episode" value="` + eps[2].ID + `"`,
		htmlText(allot.ApproveWaitingCommand("weekly")),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	// A form that names no episode sends nothing and says how to go on.
	code, body := p.post(t, "/act", url.Values{"act": {console.ActApproveAll}, "pipeline": {"weekly"}, "episodes": {" "}, "reason": {"r"}, "csrf": {p.csrf(t)}}, nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(refusal(body), "names no episodes") {
		t.Errorf("approve-all of no episode = %d %q, want 422 naming the fault", code, refusal(body))
	}
}

// A refusal speaks of the form the person filled in, not of the CLI's
// flags (issue 41 §1): a form without what its action needs is refused
// with 422 in the form's words, before anything is sent or written.
func TestRefusalsSpeakOfTheForm(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	csrf := p.csrf(t)
	form := func(kv ...string) url.Values {
		f := url.Values{"reason": {"r"}, "csrf": {csrf}}
		for i := 0; i < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	for name, c := range map[string]struct {
		form url.Values
		want string
	}{
		"approve without an episode": {form("act", console.ActApprove, "pipeline", "weekly"), "the form names no episode: reload the page"},
		"reject without a pipeline":  {form("act", console.ActReject, "episode", "2026-W32-0"), "the form names no pipeline"},
		"resolve without a step":     {form("act", console.ActResolve, "pipeline", "weekly", "episode", "2026-W32-0", "resolve", console.ExitRetry), "the form names no step"},
		"resolve without an exit":    {form("act", console.ActResolve, "pipeline", "weekly", "episode", "2026-W32-0", "step", "video"), "choose what to do with step video: one of the exits the form offers"},
		"adopt without a reference":  {form("act", console.ActResolve, "pipeline", "weekly", "episode", "2026-W32-0", "step", "video", "resolve", console.ExitAdopt, "ref", " "), "fill in the reference box"},
		"a limit left empty":         {form("act", console.ActSetLimit, "budget", "video-weekly", "period", "2026-W32", "request_id", "x"), "fill in the new limit"},
		"pause without a vendor":     {form("act", console.ActVendorPause), "the form names no vendor"},
	} {
		code, body := p.post(t, "/act", c.form, nil)
		got := refusal(body)
		if code != http.StatusUnprocessableEntity || !strings.Contains(got, htmlText(c.want)) || strings.Contains(got, "--") {
			t.Errorf("%s: = %d %q, want 422 saying %q and naming no flag", name, code, got, c.want)
		}
	}
	if p.paused(t, "covers") {
		t.Fatal("a refused form paused a vendor")
	}
}

// A signed-in operator acknowledges a period's open charges outside its
// budget's records from the page, recorded with their name and reason as
// `starter budget acknowledge` records them; the form is gone after, and a
// second one is refused (issue 41 §1).
func TestAcknowledgeOnThePage(t *testing.T) {
	p := newActingPage(t, true)
	p.signIn(t)
	fixture := &ledgertest.Ledger{T: t, Led: p.in.Ledger}
	fixture.ChargeWithoutReservation("weekly", ledgertest.BudgetMonday.Add(10*time.Hour), "vt_early", 300)
	// Both budgets covering the charge offer their form.
	forms := func(page string) int { return strings.Count(page, `name="act" value="`+console.ActAcknowledge+`"`) }
	if page := p.get(t, "/"); forms(page) != 2 {
		t.Fatalf("the page offers %d acknowledge forms for the open charge, want one per budget covering it (2):\n%s", forms(page), page)
	}
	form := url.Values{"act": {console.ActAcknowledge}, "budget": {"video-weekly"}, "period": {"2026-W32"}, "reason": {"sent before the budget existed"}, "csrf": {p.csrf(t)}}
	code, _ := p.post(t, "/act", form, nil)
	if code != http.StatusSeeOther {
		t.Fatalf("acknowledge = %d, want 303", code)
	}
	acks, err := p.in.Ledger.ChargeAcks(context.Background(), "video-weekly")
	if err != nil || len(acks) != 1 || acks[0].By != "alice" || acks[0].Reason != "sent before the budget existed" {
		t.Fatalf("the ledger's acknowledgements: %+v, %v", acks, err)
	}
	if page := p.get(t, "/"); forms(page) != 1 || !strings.Contains(page, "3.00 USD acknowledged") {
		t.Fatalf("after the acknowledgement the page still offers the form, or does not count it:\n%s", page)
	}
	form.Set("csrf", p.csrf(t))
	if code, body := p.post(t, "/act", form, nil); code != http.StatusUnprocessableEntity || !strings.Contains(refusal(body), "no charge outside its records left to acknowledge") {
		t.Fatalf("a second acknowledgement = %d %q", code, refusal(body))
	}
}
