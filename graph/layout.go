package graph

import (
	"math"

	"github.com/nulab/autog"
	ag "github.com/nulab/autog/graph"
)

// margin surrounds the drawing.
const margin = 24

// layout places nodes and routes edges. The forward edges form a DAG (they
// lead to states first seen later), which autog lays out top to bottom:
// network-simplex layering, weighted-median ordering, vertical-align
// positioning (the one positioning that never overlaps boxes and has no
// unbounded recursion) and polyline routing. Backward edges are routed on
// the right of the boxes they span, self edges as a small loop on the right
// of their node, so loops stand apart from the forward flow. If autog
// fails, a plain grid is used.
func layout(g *Graph, o Options) {
	if len(g.Nodes) == 0 {
		g.Width, g.Height = 2*margin, 2*margin
		return
	}
	byID := make(map[string]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		byID[n.ID] = n
		n.W, n.H = o.NodeWidth, o.NodeHeight
	}
	routed := map[[2]string][][2]float64{}
	if !autoLayout(g, o, routed) {
		gridLayout(g, o)
		routed = map[[2]string][][2]float64{}
	}
	minX, minY := math.Inf(1), math.Inf(1)
	maxX, maxY := math.Inf(-1), math.Inf(-1)
	for _, n := range g.Nodes {
		minX, minY = min(minX, n.X), min(minY, n.Y)
		maxX, maxY = max(maxX, n.X+n.W), max(maxY, n.Y+n.H)
	}
	backs := 0
	for _, e := range g.Edges {
		from, to := byID[e.From], byID[e.To]
		switch pts := routed[[2]string{e.From, e.To}]; {
		case e.Direction == Self:
			x, y := from.X+from.W, from.Y+from.H/2
			e.Points = [][2]float64{{x, y - 12}, {x + 28, y - 18}, {x + 28, y + 18}, {x, y + 12}}
		case e.Direction == Backward:
			e.Points = sideRoute(g, from, to, backs)
			backs++
		case len(pts) >= 2:
			e.Points = orient(pts, from, to)
		default:
			e.Points = [][2]float64{center(from), center(to)}
		}
		for _, p := range e.Points {
			minX, minY = min(minX, p[0]), min(minY, p[1])
			maxX, maxY = max(maxX, p[0]), max(maxY, p[1])
		}
	}
	dx, dy := margin-minX, margin-minY
	for _, n := range g.Nodes {
		n.X, n.Y = round(n.X+dx), round(n.Y+dy)
	}
	for _, e := range g.Edges {
		for i := range e.Points {
			e.Points[i] = [2]float64{round(e.Points[i][0] + dx), round(e.Points[i][1] + dy)}
		}
	}
	g.Width, g.Height = round(maxX-minX+2*margin), round(maxY-minY+2*margin)
}

// autoLayout runs autog; it reports false if autog panicked.
func autoLayout(g *Graph, o Options, routed map[[2]string][][2]float64) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	var src ag.EdgeSlice
	linked := map[string]bool{}
	for _, e := range g.Edges {
		if e.Direction != Forward {
			continue
		}
		src = append(src, []string{e.From, e.To})
		linked[e.From], linked[e.To] = true, true
	}
	for _, n := range g.Nodes {
		if !linked[n.ID] {
			// autog only knows nodes through edges; a self edge keeps an
			// isolated node in the layout (autog sets self edges aside).
			src = append(src, []string{n.ID, n.ID})
		}
	}
	opts := []autog.Option{
		autog.WithCycleBreaking(autog.CycleBreakingDepthFirst),
		autog.WithLayering(autog.LayeringNetworkSimplex),
		autog.WithOrdering(autog.OrderingWMedian),
		autog.WithPositioning(autog.PositioningVAlign),
		autog.WithEdgeRouting(autog.EdgeRoutingPolyline),
		autog.WithNodeFixedSize(o.NodeWidth, o.NodeHeight),
		autog.WithNodeSpacing(40),
		autog.WithLayerSpacing(72),
	}
	out := autog.Layout(src, opts...)
	placed := 0
	byID := make(map[string]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		byID[n.ID] = n
	}
	for _, ln := range out.Nodes {
		if n := byID[ln.ID]; n != nil {
			n.X, n.Y = ln.X, ln.Y
			placed++
		}
	}
	for _, le := range out.Edges {
		if le.FromID == le.ToID || len(le.Points) < 2 {
			continue
		}
		routed[[2]string{le.FromID, le.ToID}] = le.Points
	}
	return placed == len(g.Nodes)
}

// sideRoute routes a backward edge out of the right side of its source, up
// a channel right of every box it passes, into the right side of its
// target. Each backward edge gets its own channel.
func sideRoute(g *Graph, from, to *Node, k int) [][2]float64 {
	y1, y2 := from.Y+from.H/2+6, to.Y+to.H/2-6
	top, bottom := min(from.Y, to.Y), max(from.Y+from.H, to.Y+to.H)
	right := max(from.X+from.W, to.X+to.W)
	for _, n := range g.Nodes {
		if n.Y < bottom && n.Y+n.H > top {
			right = max(right, n.X+n.W)
		}
	}
	cx := right + 20 + float64(k%6)*10
	return [][2]float64{{from.X + from.W, y1}, {cx, y1}, {cx, y2}, {to.X + to.W, y2}}
}

// gridLayout places nodes in first-visit order on a grid.
func gridLayout(g *Graph, o Options) {
	cols := max(1, int(math.Ceil(math.Sqrt(float64(len(g.Nodes))))))
	for i, n := range g.Nodes {
		n.X = float64(i%cols) * (o.NodeWidth + 40)
		n.Y = float64(i/cols) * (o.NodeHeight + 72)
	}
}

// orient returns the polyline running from the source box to the target box
// (autog keeps reversed edges' points in layout order).
func orient(pts [][2]float64, from, to *Node) [][2]float64 {
	out := make([][2]float64, len(pts))
	copy(out, pts)
	if dist(out[0], center(from))+dist(out[len(out)-1], center(to)) > dist(out[0], center(to))+dist(out[len(out)-1], center(from)) {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func center(n *Node) [2]float64 { return [2]float64{n.X + n.W/2, n.Y + n.H/2} }

func dist(a, b [2]float64) float64 { return math.Hypot(a[0]-b[0], a[1]-b[1]) }

func round(f float64) float64 { return math.Round(f*10) / 10 }
