package bench

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// CPUModel names this machine's CPU from /proc/cpuinfo: its model name,
// family and model ("" where there is no /proc/cpuinfo).
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	var name, family, model string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			if name != "" {
				break // the first processor is enough
			}
			continue
		}
		switch strings.TrimSpace(k) {
		case "model name":
			name = strings.TrimSpace(v)
		case "cpu family":
			family = strings.TrimSpace(v)
		case "model":
			model = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("%s (family %s, model %s)", name, family, model)
}
