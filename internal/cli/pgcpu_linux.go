package cli

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// postmasterOf returns the PostgreSQL postmaster of the server backend
// pid when that server runs on this host and its processes are visible
// here (the same PID namespace): the backend's parent, named postgres.
func postmasterOf(backend int) (int, bool) {
	f, ok := procStat(backend)
	if !ok || f.comm != "postgres" {
		return 0, false
	}
	pm, ok := procStat(f.ppid)
	if !ok || (pm.comm != "postgres" && pm.comm != "postmaster") {
		return 0, false
	}
	return f.ppid, true
}

// serverCPU is the CPU time (user + system) of the postmaster pm and of
// all its processes, those that exited included (their times are in the
// postmaster's children's times once it has reaped them).
func serverCPU(pm int) time.Duration {
	p, ok := procStat(pm)
	if !ok {
		return 0
	}
	ticks := p.utime + p.stime + p.cutime + p.cstime
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pm {
			continue
		}
		if c, ok := procStat(pid); ok && c.ppid == pm {
			ticks += c.utime + c.stime
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

type procFields struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64
}

// procStat reads the fields of /proc/PID/stat that serverCPU needs.
func procStat(pid int) (procFields, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procFields{}, false
	}
	// "pid (comm) state ppid …": comm may hold spaces and parentheses, so
	// the fields start after the last ')'.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procFields{}, false
	}
	f := bytes.Fields(b[end+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 17-3+1 {
		return procFields{}, false
	}
	num := func(n int) int64 { v, _ := strconv.ParseInt(string(f[n-3]), 10, 64); return v }
	return procFields{comm: string(b[open+1 : end]), ppid: int(num(4)),
		utime: num(14), stime: num(15), cutime: num(16), cstime: num(17)}, true
}
