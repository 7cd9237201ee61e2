// Package webui holds only a browser test: headless Chromium drives the
// Temporal Web UI that the one-command dev setup (internal/devstack)
// embeds, lists one pipeline's workflows with a search-attribute query,
// opens an Episode and saves a screenshot of it as a test artifact.
//
// Chromium is found through $ALLOT_CHROMIUM, /usr/bin/chromium or
// `chromium` on PATH. Without it the test is skipped, except when $CI is set:
// then it fails, so CI never silently loses it. On Debian:
//
//	apt-get update && apt-get install -y chromium
//
// The screenshot goes to $ALLOT_TEST_ARTIFACTS if set, else to
// <os.TempDir()>/allot-test-artifacts; the test logs its path.
package webui
