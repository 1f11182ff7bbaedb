//go:build race

package probe

// raceBuild: the tests are built with -race.
const raceBuild = true
