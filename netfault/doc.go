// Package netfault holds tests only: gssh against fleet hosts put in
// network namespaces the test creates (ip netns, veth pairs), cut off and
// restored mid-job, with the gssh binary built for the test. They need
// root and iproute2; with CI=true they fail rather than skip without them.
package netfault
