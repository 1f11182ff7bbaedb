// Package docs holds pgdns's user documentation, one page per task, beside
// the README that maps it. It has no code: its test checks that every
// relative link of README.md and docs/ leads to a file, and every #anchor to
// a heading, so that moving a page or renaming a heading cannot leave a
// reader at a dead end.
package docs
