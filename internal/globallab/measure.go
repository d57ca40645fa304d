//go:build linux

package globallab

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/sim"
)

// wanDelay is the one-way delay between sites i and j (0 for i == j).
func wanDelay(i, j int) time.Duration {
	for _, w := range wans() {
		if (w.a == i && w.b == j) || (w.a == j && w.b == i) {
			return w.delay
		}
	}
	return 0
}

// nextSite is the site nearest site i other than itself.
func nextSite(i int) int {
	best := -1
	for j := range Sites() {
		if j != i && (best < 0 || wanDelay(i, j) < wanDelay(i, best)) {
			best = j
		}
	}
	return best
}

// nearest is row group (a): each geography's clients reach their own
// site through the anycast address, and the handshake is that of the
// client link only, against the direct path to the next site's unicast
// address; rows a1-a3 over IPv4, a4-a6 over IPv6.
func (r *run) nearest(ctx context.Context) error {
	for _, v6 := range []bool{false, true} {
		for i, c := range r.clients {
			row, err := r.nearestRow(ctx, i, c, v6)
			if err != nil {
				return err
			}
			r.rep.add(row)
		}
	}
	return nil
}

// nearestRow measures row a(i+1), or a(i+4) over IPv6.
func (r *run) nearestRow(ctx context.Context, i int, c *client, v6 bool) (Row, error) {
	s, far := c.site, r.topo.sites[nextSite(i)]
	anyAddr, farAddr, url, id := AnycastAddr, far.EdgeUnicast(), anycastURL(), i+1
	if v6 {
		anyAddr, farAddr, url, id = AnycastAddr6, far.EdgeUnicast6(), anycastURL6(), i+1+len(r.clients)
	}
	port := strconv.Itoa(edgePort)
	for _, addr := range []string{anyAddr, farAddr} { // the IPv6 routes may still be converging
		if err := c.reach(ctx, net.JoinHostPort(addr, port), 10*time.Second); err != nil {
			return Row{}, err
		}
	}
	a := get(ctx, c.fresh, url)
	anyHS, err := c.handshake(ctx, net.JoinHostPort(anyAddr, port), 7)
	if err != nil {
		return Row{}, err
	}
	direct, err := c.handshake(ctx, net.JoinHostPort(farAddr, port), 5)
	if err != nil {
		return Row{}, err
	}
	expAny, expDirect := 2*clientDelay, 2*(clientDelay+wanDelay(i, far.k))
	return Row{
		ID:       fmt.Sprintf("a%d", id),
		What:     fmt.Sprintf("%s clients → anycast %s", s.City, anyAddr),
		Expected: fmt.Sprintf("%s edge; handshake %s vs %s direct to %s", s.City, ms(expAny), ms(expDirect), far.City),
		Measured: fmt.Sprintf("%s edge; %s vs %s (%s less)", cityOf(a.Edge), ms(anyHS), ms(direct), ms(direct-anyHS)),
		Verdict:  verdict(a.OK() && a.Edge == s.Key && anyHS < direct && anyHS < expAny+20*time.Millisecond),
		Numbers:  map[string]float64{"anycastHandshakeMs": msf(anyHS), "directHandshakeMs": msf(direct)},
	}, nil
}

// cityOf names the site of key (or says none answered).
func cityOf(key string) string {
	for _, s := range Sites() {
		if s.Key == key {
			return s.City
		}
	}
	if key == "" {
		return "no"
	}
	return key
}

// gslb is row group (d): the GSLB answers each client subnet (sent as
// ECS by a resolver in Frankfurt) with its nearest site's unicast
// address; Berlin, where no site runs, with Frankfurt.
func (r *run) gslb(ctx context.Context) error {
	sites := r.topo.sites
	cases := []struct {
		who, ecs string
		want     *Site
	}{
		{"Berlin client (ECS " + BerlinNet + ", europe-west10)", BerlinNet, sites[1]},
		{"Tokyo client (ECS " + sites[2].ClientNet() + ")", sites[2].ClientNet(), sites[2]},
		{"Ashburn client (ECS " + sites[0].ClientNet() + ")", sites[0].ClientNet(), sites[0]},
	}
	for i, cs := range cases {
		got, err := r.clients[1].query(ctx, sites[1].DNSAddr(), GSLBName, cs.ecs)
		if err != nil {
			return err
		}
		r.rep.add(Row{
			ID:       fmt.Sprintf("d%d", i+1),
			What:     "GSLB: " + cs.who,
			Expected: fmt.Sprintf("%s %s", cs.want.City, cs.want.EdgeUnicast()),
			Measured: fmt.Sprintf("%s %s", cityOfAddr(got), strings.Join(got, " ")),
			Verdict:  verdict(slices.Equal(got, []string{cs.want.EdgeUnicast()})),
		})
	}
	return nil
}

// cityOfAddr names the site whose edge unicast address is the first of
// addrs.
func cityOfAddr(addrs []string) string {
	for _, s := range Sites() {
		if len(addrs) > 0 && addrs[0] == s.EdgeUnicast() {
			return s.City
		}
	}
	return "none:"
}

// waterfallWarmup is how long the waterfall runs before counting (the
// edge's demand window fills).
const waterfallWarmup = 2 * time.Second

// waterfall is row (b1): seed 001's spillover, scaled by 1/30. The
// European clients send Rate rps (150: 4,500/30) through the anycast
// address; Frankfurt's edge keeps europe-west3's 100 rps of RATE
// capacity (3,000/30) and sends the rest to us-east4's regional layer.
// The expectation is `spillway simulate` on the same backends.
func (r *run) waterfall(ctx context.Context) error {
	const measure = 6 * time.Second
	c := r.clients[1]
	answers := paced(ctx, r.o.Rate, nil, waterfallWarmup+measure, func(ctx context.Context) answer {
		return get(ctx, c.pooled, anycastURL())
	})
	byRegion, errs, n, viaEdge, twoHops := map[string]int{}, 0, 0, 0, 0
	for _, a := range answers {
		if a.At < waterfallWarmup {
			continue
		}
		n++
		if !a.OK() {
			errs++
			continue
		}
		byRegion[a.Region()]++
		if a.Edge == "euw" {
			viaEdge++
		}
		if a.Hops == 2 {
			twoHops++
		}
	}
	want, err := r.simulate(measure)
	if err != nil {
		return err
	}
	ok := n > 0 && errs*100 <= n && viaEdge == n-errs && twoHops == n-errs
	var exp, got []string
	nums := map[string]float64{"requests": float64(n), "failed": float64(errs)}
	for _, s := range r.topo.sites {
		w, g := share(want[s.Region], sumValues(want)), share(byRegion[s.Region], n)
		if w == 0 && g == 0 {
			continue
		}
		ok = ok && g >= w-5 && g <= w+5
		exp = append(exp, fmt.Sprintf("%s %.0f%%", s.Region, w))
		got = append(got, fmt.Sprintf("%s %.1f%%", s.Region, g))
		nums[s.Region+"Percent"] = g
	}
	r.rep.add(Row{
		ID:       "b1",
		What:     fmt.Sprintf("seed 001 waterfall /30: %.0f rps of European clients, 100 rps capacity per region", r.o.Rate),
		Expected: strings.Join(exp, ", ") + " (spillway simulate, ±5)",
		Measured: fmt.Sprintf("%s; %d failed of %d; %d via Frankfurt's edge, %d through two proxies", strings.Join(got, ", "), errs, n, viaEdge, twoHops),
		Verdict:  verdict(ok),
		Numbers:  nums,
	})
	return nil
}

// simulate runs `spillway simulate`'s engine on the backends' plan:
// Rate rps of europe-west3 clients, counted after the warm-up, by
// region.
func (r *run) simulate(measure time.Duration) (map[string]int, error) {
	res, err := sim.Run(r.common, sim.Options{Rate: r.o.Rate, Duration: waterfallWarmup + measure, Step: time.Second, Seed: 1, ClientRegion: "europe-west3"})
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	out := map[string]int{}
	for i, b := range res.Timeline {
		if time.Duration(i)*time.Second < waterfallWarmup {
			continue
		}
		for z, n := range b.Zones {
			out[(answer{Zone: z}).Region()] += n
		}
	}
	return out, nil
}

func share(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}

func sumValues(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

// cost is row (b2): the second hop's latency and CPU. The Frankfurt
// client sends costRate rps to the Frankfurt edge's unicast address,
// once through both layers (port 80) and once through the one-layer
// frontend (port 8080, the edge proxying to the endpoints itself); both
// stay in europe-west3. CPU is the edge's and the regional layer's time
// on CPU (schedstat) minus their idle rate (health checks), per request.
func (r *run) cost(ctx context.Context) error {
	const costRate, d = 50, 4 * time.Second
	c, eu := r.clients[1], r.topo.sites[1]
	pids := []int{r.edges[1].PID(), r.regions[1].PID()}
	idle, err := cpuRate(ctx, pids, 2*time.Second)
	if err != nil {
		return err
	}
	type result struct {
		p50  time.Duration
		cpu  time.Duration // per request, both processes
		errs int
	}
	measure := func(url string) (result, error) {
		before, err := cpuTimes(pids)
		if err != nil {
			return result{}, err
		}
		t0 := time.Now()
		answers := paced(ctx, costRate, nil, d, func(ctx context.Context) answer { return get(ctx, c.pooled, url) })
		after, err := cpuTimes(pids)
		if err != nil {
			return result{}, err
		}
		busy := time.Duration(0)
		for i := range pids {
			busy += after[i] - before[i] - time.Duration(float64(idle[i])*time.Since(t0).Seconds())
		}
		var lat []time.Duration
		res := result{}
		for _, a := range answers {
			if a.OK() && a.Region() == eu.Region {
				lat = append(lat, a.Latency)
			} else {
				res.errs++
			}
		}
		res.p50 = median(lat)
		if len(answers) > 0 {
			res.cpu = busy / time.Duration(len(answers))
		}
		return res, nil
	}
	one, err := measure(fmt.Sprintf("http://%s:8080/", eu.EdgeUnicast()))
	if err != nil {
		return err
	}
	two, err := measure(fmt.Sprintf("http://%s:%d/", eu.EdgeUnicast(), edgePort))
	if err != nil {
		return err
	}
	r.rep.add(Row{
		ID:       "b2",
		What:     fmt.Sprintf("the second hop's cost: Frankfurt client, %d rps, both layers in Frankfurt", costRate),
		Expected: "a small extra latency and CPU per request",
		Measured: fmt.Sprintf("p50 %s two layers vs %s one (+%s); CPU %s vs %s per request", ms(two.p50), ms(one.p50), ms(two.p50-one.p50), us(two.cpu), us(one.cpu)),
		Verdict:  verdict(one.errs == 0 && two.errs == 0),
		Numbers: map[string]float64{"p50TwoLayersMs": msf(two.p50), "p50OneLayerMs": msf(one.p50),
			"cpuTwoLayersUs": float64(two.cpu) / 1e3, "cpuOneLayerUs": float64(one.cpu) / 1e3},
	})
	return nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

// cpuTimes returns each process's time on CPU so far: the sum of its
// threads' /proc/PID/task/TID/schedstat first field (nanoseconds).
func cpuTimes(pids []int) ([]time.Duration, error) {
	out := make([]time.Duration, len(pids))
	for i, pid := range pids {
		files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		if err != nil || len(files) == 0 {
			return nil, fmt.Errorf("schedstat of %d: %v", pid, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // a thread that just exited
			}
			if fields := strings.Fields(string(b)); len(fields) > 0 {
				ns, _ := strconv.ParseInt(fields[0], 10, 64)
				out[i] += time.Duration(ns)
			}
		}
	}
	return out, nil
}

// cpuRate measures each process's CPU per second of wall time over d
// (as a Duration per second).
func cpuRate(ctx context.Context, pids []int, d time.Duration) ([]time.Duration, error) {
	before, err := cpuTimes(pids)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	after, err := cpuTimes(pids)
	if err != nil {
		return nil, err
	}
	out := make([]time.Duration, len(pids))
	for i := range pids {
		out[i] = time.Duration(float64(after[i]-before[i]) / d.Seconds())
	}
	return out, nil
}
